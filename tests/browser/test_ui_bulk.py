"""Bulk retry from the failed list: the count it will touch is shown before confirming,
keeping changes nothing, confirming creates the operation, and its page follows the
progress, page by page in the scheduler's loop (TE_BULK_PAGE_SIZE=2), until DONE with
the right figures. Screenshots of the list and the operation at 1280 px."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By

from tests.browser.pages import (
    answer_confirmation,
    click_button,
    go,
    screenshot,
    sign_in,
    wait_text,
    wait_visible,
)
from tests.support.browser_stack import Stack
from tests.support.pg import PgServer, migrated_database
from tests.support.served import HttpTarget, Reply

ENDPOINT = "ui-bulk"
#: How long a kept click has to (wrongly) reach the API before it is checked.
SETTLE_SEC = 0.5
FAILED = 5


@pytest.fixture(scope="module")
def stack(pg_server: PgServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The stack with bulk pages of two executions, so an operation takes several passes."""
    with migrated_database(pg_server, "te_ui_bulk_") as url:
        running = Stack(
            url, tmp_path_factory.mktemp("ui-bulk") / "data", settings={"TE_BULK_PAGE_SIZE": "2"}
        )
        try:
            yield running
        finally:
            running.stop()


def failed_executions(stack: Stack, target: HttpTarget) -> list[str]:
    """FAILED executions of ENDPOINT (one attempt each, the target answering 500), whose
    retries the target then answers 200."""
    target.script("/bulk", *[Reply(500, "down")] * FAILED, Reply(200, '{"ok": true}'))
    policy = {"max_attempts": 1, "backoff": "fixed", "initial_delay_ms": 100, "max_delay_ms": 100}
    spec = {"url": target.url("/bulk"), "method": "POST"}
    body = {"name": ENDPOINT, "type": "HTTP", "spec": spec, "retry_policy": policy}
    stack.ok("POST", "/endpoints", body)
    ids = []
    for i in range(FAILED):
        job = {"endpoint": ENDPOINT, "trigger": "IMMEDIATE", "idempotency_key": f"bulk-{i}"}
        ids.append(stack.execution_of(stack.ok("POST", "/jobs", job)))
    for execution_id in ids:
        stack.wait_status(execution_id, "FAILED")
    return ids


def test_bulk_retry_counts_first_then_runs_to_done(
    stack: Stack, target: HttpTarget, browser: Any, artifacts: Path
) -> None:
    ids = failed_executions(stack, target)
    sign_in(browser, stack.base, stack.key)
    go(browser, f"#/executions?status=FAILED&endpoint={ENDPOINT}&error_type=HTTP_ERROR")
    wait_text(browser, "tr", ids[0])
    screenshot(browser, artifacts, "ui-bulk-failed-list-1280")

    # the count, before anything is asked or done; keeping changes nothing
    click_button(browser, "Retry all matching")
    wait_visible(browser, "dialog#confirm")
    screenshot(browser, artifacts, "ui-bulk-confirm-count-1280")
    text = answer_confirmation(browser, confirm=False)
    assert f"Now this filter matches {FAILED} FAILED execution(s) of {ENDPOINT}" in text, text
    assert "whose last error was HTTP_ERROR" in text, text
    time.sleep(SETTLE_SEC)
    assert {stack.ok("GET", f"/executions/{i}")["status"] for i in ids} == {"FAILED"}
    assert browser.execute_script("return location.hash").startswith("#/executions")

    # confirmed: the operation's page, following it page by page to DONE
    click_button(browser, "Retry all matching")
    assert answer_confirmation(browser, confirm=True) == text
    wait_text(browser, "h1", "Bulk operation op_")
    facts = wait_text(browser, ".facts", "DONE")
    assert "Matched\n5" in facts.text and "Done\n5" in facts.text, facts.text
    assert "Refused\n0" in facts.text, facts.text
    assert "5 done, 0 refused of 5 matched" in browser.find_element(By.ID, "view").text
    assert not [b for b in browser.find_elements(By.TAG_NAME, "button") if b.text == "Abort"]
    operation_id = browser.execute_script("return location.hash").rsplit("/", 1)[-1]
    api = stack.ok("GET", f"/operations/{operation_id}")
    assert (api["action"], api["state"], api["matched"], api["done"], api["refused"]) == (
        "retry",
        "DONE",
        5,
        5,
        0,
    )
    assert api["filter"]["endpoint"] == ENDPOINT and api["filter"]["status"] == ["FAILED"]
    screenshot(browser, artifacts, "ui-bulk-operation-done-1280")
    for execution_id in ids:  # requeued, delivered again, and the target answered 200
        stack.wait_status(execution_id, "SUCCESS")


def test_a_filter_that_matches_nothing_asks_nothing(
    stack: Stack, target: HttpTarget, browser: Any
) -> None:
    sign_in(browser, stack.base, stack.key)
    go(browser, "#/executions?status=FAILED&endpoint=nobody-here")
    wait_text(browser, "#view", "No FAILED execution.")
    click_button(browser, "Retry all matching")
    wait_text(browser, "#notice", "No FAILED execution matches this filter: nothing to retry.")
    assert not browser.find_element(By.ID, "confirm").is_displayed()


def test_bulk_actions_follow_the_lists_status(stack: Stack, browser: Any) -> None:
    sign_in(browser, stack.base, stack.key)
    offered = {}
    for status in ("FAILED", "PENDING", "SUCCESS", "RUNNING", ""):
        go(browser, f"#/executions?status={status}&endpoint=nobody-{status or 'any'}")
        wait_text(browser, "h1", f"Executions: {status or 'any status'}")
        labels = [b.text for b in browser.find_elements(By.CSS_SELECTOR, ".bulk button")]
        offered[status] = labels
    assert offered == {
        "FAILED": ["Retry all matching", "Delete all matching"],
        "PENDING": ["Cancel all matching"],
        "SUCCESS": ["Delete all matching"],
        "RUNNING": [],  # no bulk action applies to work in delivery
        "": [],  # any status: pick one first
    }
