"""Abort of a running bulk operation from its page, and a bulk cancel from a list of
PENDING executions. The stack runs the lean profile with an hour between scheduled
invocations and bulk pages of one execution, so after the invocations at start an
operation stays RUNNING after its first page (done by the request) until it is aborted:
no race with the scheduler's loop."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By

from tests.browser.pages import (
    answer_confirmation,
    click_button,
    click_link,
    go,
    screenshot,
    sign_in,
    wait_text,
)
from tests.support.browser_stack import Stack
from tests.support.pg import PgServer, migrated_database
from tests.support.served import HttpTarget

ENDPOINT = "ui-bulk-abort"
SETTLE_SEC = 0.5
PENDING = 4


@pytest.fixture(scope="module")
def stack(pg_server: PgServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with migrated_database(pg_server, "te_ui_abort_") as url:
        running = Stack(
            url,
            tmp_path_factory.mktemp("ui-bulk-abort") / "data",
            settings={"TE_BULK_PAGE_SIZE": "1", "TE_LOG_LEVEL": "DEBUG"},
            args=("--profile", "lean", "--schedule-period", "3600"),
        )
        try:
            # the scheduled invocations at start (the bulk loop among them) have returned
            running.wait_for(lambda: _returned(running, "reclaim_stuck_executions"), "start")
            yield running
        finally:
            running.stop()


def _returned(stack: Stack, function: str) -> bool:
    return any("scheduled_invocation" in line and function in line for line in stack.output)


def pending_executions(stack: Stack, target: HttpTarget) -> list[str]:
    """PENDING executions of ENDPOINT: DELAYED an hour ahead, beyond any pass's look-ahead."""
    spec = {"url": target.url("/never"), "method": "POST"}
    stack.ok("POST", "/endpoints", {"name": ENDPOINT, "type": "HTTP", "spec": spec})
    run_at = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    ids = []
    for i in range(PENDING):
        job = {
            "endpoint": ENDPOINT,
            "trigger": "DELAYED",
            "run_at": run_at,
            "idempotency_key": f"a{i}",
        }
        ids.append(stack.execution_of(stack.ok("POST", "/jobs", job)))
    return ids


def statuses(stack: Stack, ids: list[str]) -> list[str]:
    return sorted(stack.ok("GET", f"/executions/{i}")["status"] for i in ids)


def test_a_running_bulk_cancel_is_aborted_after_a_confirmation(
    stack: Stack, target: HttpTarget, browser: Any, artifacts: Path
) -> None:
    ids = pending_executions(stack, target)
    sign_in(browser, stack.base, stack.key)
    go(browser, f"#/executions?status=PENDING&endpoint={ENDPOINT}")
    wait_text(browser, "tr", ids[0])
    click_button(browser, "Cancel all matching")
    text = answer_confirmation(browser, confirm=True)
    assert f"matches {PENDING} PENDING execution(s) of {ENDPOINT}." in text, text
    assert "cancelled and never delivered" in text, text

    # RUNNING after the request's own page: one of four cancelled, Abort offered
    facts = wait_text(browser, ".facts", "RUNNING")
    assert "Matched\n1" in facts.text and "Done\n1" in facts.text, facts.text
    assert "1 done, 0 refused of 1 matched so far" in browser.find_element(By.ID, "view").text
    screenshot(browser, artifacts, "ui-bulk-operation-running-1280")
    operation_id = browser.execute_script("return location.hash").rsplit("/", 1)[-1]

    # Abort asks first; keeping leaves it running
    click_button(browser, "Abort")
    asked = answer_confirmation(browser, confirm=False)
    assert "cannot be resumed" in asked, asked
    time.sleep(SETTLE_SEC)
    assert stack.ok("GET", f"/operations/{operation_id}")["state"] == "RUNNING"

    click_button(browser, "Abort")
    answer_confirmation(browser, confirm=True)
    facts = wait_text(browser, ".facts", "ABORTED")
    assert "Matched\n1" in facts.text and "Refused\n0" in facts.text, facts.text
    assert not [b for b in browser.find_elements(By.TAG_NAME, "button") if b.text == "Abort"]
    api = stack.ok("GET", f"/operations/{operation_id}")
    assert (api["action"], api["state"], api["matched"], api["done"]) == ("cancel", "ABORTED", 1, 1)
    assert statuses(stack, ids) == ["CANCELLED", "PENDING", "PENDING", "PENDING"]
    click_link(browser, "The executions of this filter")  # back to the list it came from
    wait_text(browser, "h1", "Executions: PENDING")
    wait_text(browser, "tr", ids[0])  # the oldest: the newest went in the first page
    assert len(browser.find_elements(By.CSS_SELECTOR, "tbody tr")) == PENDING - 1
