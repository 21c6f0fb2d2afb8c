"""Actions that cannot be undone ask first, in a modal dialog that says what will happen.

For each of them (cancel an execution, a job, a batch; pause a cron job; run a cron job
now; retry a failed execution; redrive, in test_ui_controls.py) the click opens the
dialog; keeping (its button or Escape) changes nothing in the API, confirming does it. A
pause of an endpoint and every resume are undone by their opposite and ask nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.browser.pages import (
    answer_confirmation,
    click_button,
    confirmation_open,
    go,
    sign_in,
    wait_text,
)
from tests.support.browser_stack import Stack
from tests.support.served import HttpTarget, Reply

ENDPOINT = "ui-confirm"
#: How long a click that was kept has to (wrongly) reach the API before it is checked.
SETTLE_SEC = 0.5


def _endpoint(stack: Stack, target: HttpTarget) -> None:
    if stack.call("GET", f"/endpoints/{ENDPOINT}")[0] == 404:
        target.script("/confirm", Reply(200, "ok"))
        policy = {"max_attempts": 1, "backoff": "fixed", "initial_delay_ms": 100}
        stack.ok(
            "POST",
            "/endpoints",
            {
                "name": ENDPOINT,
                "type": "HTTP",
                "spec": {"url": target.url("/confirm"), "method": "POST"},
                "retry_policy": {**policy, "max_delay_ms": 100},
            },
        )


def _cron(stack: Stack, target: HttpTarget) -> dict[str, Any]:
    _endpoint(stack, target)
    body = {"endpoint": ENDPOINT, "trigger": "CRON", "cron": "0 3 * * *", "timezone": "UTC"}
    return dict(stack.ok("POST", "/jobs", body))


def _later() -> str:
    return (datetime.now(UTC) + timedelta(hours=1)).isoformat()


def _keep_then_confirm(
    browser: Any, label: str, state: Callable[[], Any], *, escape: bool = False
) -> tuple[str, Any]:
    """Click ``label``, keep (button or Escape): ``state()`` is unchanged; click again and
    confirm. The dialog's text and the state before."""
    before = state()
    click_button(browser, label)
    text = answer_confirmation(browser, confirm=False, escape=escape)
    time.sleep(SETTLE_SEC)
    assert state() == before, f"{label} acted without being confirmed"
    click_button(browser, label)
    assert answer_confirmation(browser, confirm=True) == text
    return text, before


def test_cancel_an_execution_asks_first(stack: Stack, target: HttpTarget, browser: Any) -> None:
    _endpoint(stack, target)
    body = {"endpoint": ENDPOINT, "trigger": "DELAYED", "run_at": _later()}
    execution_id = stack.execution_of(stack.ok("POST", "/jobs", body | {"idempotency_key": "x"}))
    sign_in(browser, stack.base, stack.key)
    go(browser, f"#/execution/{execution_id}")
    wait_text(browser, ".facts", "PENDING")

    def status() -> str:
        return str(stack.ok("GET", f"/executions/{execution_id}")["status"])

    text, before = _keep_then_confirm(browser, "Cancel", status)
    assert before == "PENDING"
    assert execution_id in text and "cannot be undone" in text
    stack.wait_status(execution_id, "CANCELLED")
    wait_text(browser, ".facts", "CANCELLED")


def test_cancel_a_cron_job_asks_first(stack: Stack, target: HttpTarget, browser: Any) -> None:
    cron = _cron(stack, target)
    sign_in(browser, stack.base, stack.key)
    go(browser, f"#/job/{cron['job_id']}")
    wait_text(browser, ".facts", "ACTIVE")

    def status() -> str:
        return str(stack.ok("GET", f"/jobs/{cron['job_id']}")["status"])

    text, before = _keep_then_confirm(browser, "Cancel job", status, escape=True)
    assert before == "ACTIVE"
    assert "retired" in text and "cannot be undone" in text
    stack.wait_for(lambda: status() == "RETIRED", "the job retired")


def test_pause_of_a_cron_job_asks_first_and_resume_does_not(
    stack: Stack, target: HttpTarget, browser: Any
) -> None:
    cron = _cron(stack, target)
    sign_in(browser, stack.base, stack.key)
    go(browser, f"#/job/{cron['job_id']}")
    wait_text(browser, ".facts", "ACTIVE")

    def paused_at() -> Any:
        return stack.ok("GET", f"/jobs/{cron['job_id']}")["paused_at"]

    text, before = _keep_then_confirm(browser, "Pause", paused_at)
    assert before is None
    assert "skipped" in text
    stack.wait_for(paused_at, "the job paused")

    click_button(browser, "Resume")  # undoes a pause: no question
    stack.wait_for(lambda: paused_at() is None, "the job resumed")
    assert not confirmation_open(browser)


def test_run_now_asks_first(stack: Stack, target: HttpTarget, browser: Any) -> None:
    cron = _cron(stack, target)
    sign_in(browser, stack.base, stack.key)
    go(browser, f"#/job/{cron['job_id']}")
    wait_text(browser, ".facts", "ACTIVE")

    def runs() -> int:
        return len(stack.ok("GET", f"/jobs/{cron['job_id']}/executions")["items"])

    text, before = _keep_then_confirm(browser, "Run now", runs, escape=True)
    assert ENDPOINT in text and "runs once more now" in text
    stack.wait_for(lambda: runs() == before + 1, "one more execution")


def test_cancel_a_batch_asks_first(stack: Stack, target: HttpTarget, browser: Any) -> None:
    _endpoint(stack, target)
    jobs = [
        {"endpoint": ENDPOINT, "trigger": "DELAYED", "run_at": _later(), "idempotency_key": k}
        for k in ("b1", "b2")
    ]
    batch = stack.ok("POST", "/jobs/batch", {"jobs": jobs})
    sign_in(browser, stack.base, stack.key)
    go(browser, f"#/batch/{batch['batch_id']}")
    wait_text(browser, "main", "2 jobs")

    def counts() -> dict[str, int]:
        return dict(stack.ok("GET", f"/batches/{batch['batch_id']}")["counts"])

    text, before = _keep_then_confirm(browser, "Cancel batch", counts)
    assert before.get("CANCELLED", 0) == 0
    assert batch["batch_id"] in text and "cannot be undone" in text
    stack.wait_for(lambda: counts().get("CANCELLED") == 2, "the batch cancelled")


def test_retry_asks_first(stack: Stack, target: HttpTarget, browser: Any) -> None:
    target.script("/confirm-retry", Reply(500, "no"), Reply(200, "ok"))
    policy = {"max_attempts": 1, "backoff": "fixed", "initial_delay_ms": 100, "max_delay_ms": 100}
    stack.ok(
        "POST",
        "/endpoints",
        {
            "name": "ui-confirm-retry",
            "type": "HTTP",
            "spec": {"url": target.url("/confirm-retry"), "method": "POST"},
            "retry_policy": policy,
        },
    )
    body = {"endpoint": "ui-confirm-retry", "trigger": "IMMEDIATE", "idempotency_key": "r"}
    execution_id = stack.execution_of(stack.ok("POST", "/jobs", body))
    stack.wait_status(execution_id, "FAILED")
    sign_in(browser, stack.base, stack.key)
    go(browser, "#/executions?status=FAILED&endpoint=ui-confirm-retry")  # the failed list
    wait_text(browser, "tr", execution_id)

    def status() -> str:
        return str(stack.ok("GET", f"/executions/{execution_id}")["status"])

    # Leaving the view closes the question unanswered: nothing happens.
    click_button(browser, "Retry")
    assert confirmation_open(browser)
    go(browser, "#/endpoints")
    stack.wait_for(lambda: not confirmation_open(browser), "the dialog closed")
    time.sleep(SETTLE_SEC)
    assert status() == "FAILED"

    go(browser, "#/executions?status=FAILED&endpoint=ui-confirm-retry")
    wait_text(browser, "tr", execution_id)
    text, _ = _keep_then_confirm(browser, "Retry", status)
    assert execution_id in text and "delivered to its endpoint again" in text
    stack.wait_status(execution_id, "SUCCESS")
