"""Retry from the dashboard: a failed execution, one click, and it succeeds.

The click goes through ``POST /executions/{id}/retry``: were the route missing, the page
would show the API's 404 and this test would fail.
"""

from __future__ import annotations

from typing import Any

from tests.browser.pages import answer_confirmation, click_button, go, sign_in, wait_text
from tests.support.browser_stack import Stack
from tests.support.served import HttpTarget, Reply


def test_retry_of_a_failed_execution_succeeds(
    stack: Stack, target: HttpTarget, browser: Any
) -> None:
    # The target fails the first delivery (the only attempt), then answers 200.
    target.script("/recovers", Reply(500, "not yet"), Reply(200, '{"ok": true}'))
    policy = {"max_attempts": 1, "backoff": "fixed", "initial_delay_ms": 100, "max_delay_ms": 100}
    stack.ok(
        "POST",
        "/endpoints",
        {
            "name": "ui-recovers",
            "type": "HTTP",
            "spec": {"url": target.url("/recovers"), "method": "POST"},
            "retry_policy": policy,
        },
    )
    job = stack.ok(
        "POST",
        "/jobs",
        {"endpoint": "ui-recovers", "trigger": "IMMEDIATE", "idempotency_key": "retry-me"},
    )
    execution_id = stack.execution_of(job)
    stack.wait_status(execution_id, "FAILED")
    sign_in(browser, stack.base, stack.key)

    # From the dead-letter view: the failed execution is listed with its error and a button.
    go(browser, "#/executions?status=FAILED&endpoint=ui-recovers")
    wait_text(browser, "tr", execution_id)
    go(browser, f"#/execution/{execution_id}")
    wait_text(browser, ".why", "HTTP_ERROR")
    click_button(browser, "Retry")
    answer_confirmation(browser, confirm=True)

    wait_text(browser, ".facts", "SUCCESS")  # the page refreshes to the new outcome
    assert stack.ok("GET", f"/executions/{execution_id}")["status"] == "SUCCESS"
    attempts = stack.ok("GET", f"/executions/{execution_id}/attempts")["items"]
    assert [a["status"] for a in attempts] == ["FAILED", "SUCCESS"]  # numbering continues
    assert len(target.received("/recovers")) == 2
