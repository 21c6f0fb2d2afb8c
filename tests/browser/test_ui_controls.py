"""Pause/resume and redrive from the dashboard.

A pause of an endpoint asks nothing (Resume undoes it); a redrive asks first, saying
what it will requeue, and a redrive kept requeues nothing.
"""

from __future__ import annotations

import time
from typing import Any

from selenium.webdriver.common.by import By

from tests.browser.pages import (
    answer_confirmation,
    click_button,
    go,
    notice,
    sign_in,
    wait_text,
    wait_visible,
)
from tests.support.browser_stack import Stack
from tests.support.served import HttpTarget, Reply


def _endpoint(stack: Stack, name: str, url: str) -> None:
    stack.ok(
        "POST",
        "/endpoints",
        {"name": name, "type": "HTTP", "spec": {"url": url, "method": "POST"}},
    )


def test_pause_and_resume_an_endpoint(stack: Stack, target: HttpTarget, browser: Any) -> None:
    _endpoint(stack, "ui-pausable", target.url("/pausable"))
    sign_in(browser, stack.base, stack.key)
    go(browser, "#/endpoints")
    row = wait_text(browser, "tr", "ui-pausable")
    row.find_element(By.XPATH, ".//button[text()='Pause']").click()
    wait_text(browser, "tr", "PAUSED")
    assert stack.ok("GET", "/endpoints/ui-pausable")["paused_at"] is not None

    # Nothing is delivered while paused; resuming delivers what waited.
    job = stack.ok(
        "POST",
        "/jobs",
        {"endpoint": "ui-pausable", "trigger": "IMMEDIATE", "idempotency_key": "held"},
    )
    row = wait_text(browser, "tr", "ui-pausable")
    row.find_element(By.XPATH, ".//button[text()='Resume']").click()
    wait_text(browser, "#notice", "resumed")
    assert stack.ok("GET", "/endpoints/ui-pausable")["paused_at"] is None
    stack.wait_status(stack.execution_of(job), "SUCCESS")


def test_redrive_failed_executions_of_an_endpoint(
    stack: Stack, target: HttpTarget, browser: Any
) -> None:
    target.script("/redrive", Reply(500, "down"), Reply(500, "down"), Reply(200, "up"))
    _endpoint(stack, "ui-redrive", target.url("/redrive"))
    ids = []
    for key in ("r1", "r2"):
        body = {"endpoint": "ui-redrive", "trigger": "IMMEDIATE", "idempotency_key": key}
        ids.append(stack.execution_of(stack.ok("POST", "/jobs", body)))
    for execution_id in ids:
        stack.wait_status(execution_id, "FAILED")
    sign_in(browser, stack.base, stack.key)

    go(browser, "#/executions?status=FAILED&endpoint=ui-redrive")
    for execution_id in ids:
        wait_text(browser, "tr", execution_id)
    wait_visible(browser, ".redrive input[name=endpoint]")
    click_button(browser, "Redrive")  # asks first, saying what it will requeue
    text = answer_confirmation(browser, confirm=False)
    assert "Every FAILED execution of ui-redrive" in text
    time.sleep(0.5)
    for execution_id in ids:  # kept: nothing requeued
        assert stack.ok("GET", f"/executions/{execution_id}")["status"] == "FAILED"
    click_button(browser, "Redrive")
    answer_confirmation(browser, confirm=True)
    wait_text(browser, "#notice", "Requeued 2")
    for execution_id in ids:
        stack.wait_status(execution_id, "SUCCESS")
    click_button(browser, "Redrive")  # idempotent: nothing more to requeue
    answer_confirmation(browser, confirm=True)
    wait_text(browser, "#notice", "Requeued 0")
    assert "Requeued 0" in notice(browser)
