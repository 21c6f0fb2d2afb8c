"""An endpoint's page lists its blocked ordering keys, each with a Skip button that asks
first (the failed head stays FAILED for good) and, confirmed, lets the key's next execution
start."""

from __future__ import annotations

import time
from typing import Any

from tests.browser.pages import answer_confirmation, click_button, go, sign_in, wait_text
from tests.support.browser_stack import Stack
from tests.support.served import HttpTarget, Reply

ENDPOINT = "ui-ordered"
#: How long a click that was kept has to (wrongly) reach the API before it is checked.
SETTLE_SEC = 0.5


def test_the_endpoint_page_lists_blocked_keys_and_skips_one_after_confirming(
    stack: Stack, target: HttpTarget, browser: Any
) -> None:
    target.script("/ordered", Reply(500, "down"), Reply(200, "ok"))
    policy = {"max_attempts": 1, "backoff": "fixed", "initial_delay_ms": 100, "max_delay_ms": 100}
    stack.ok(
        "POST",
        "/endpoints",
        {
            "name": ENDPOINT,
            "type": "HTTP",
            "spec": {"url": target.url("/ordered"), "method": "POST"},
            "retry_policy": policy,
            "ordering": {"on_failure": "block"},
        },
    )
    job = {"endpoint": ENDPOINT, "trigger": "IMMEDIATE", "ordering_key": "tenant-7"}
    head = stack.execution_of(stack.ok("POST", "/jobs", job | {"idempotency_key": "first"}))
    stack.wait_status(head, "FAILED")
    second = stack.execution_of(stack.ok("POST", "/jobs", job | {"idempotency_key": "second"}))
    sign_in(browser, stack.base, stack.key)
    go(browser, f"#/endpoint/{ENDPOINT}")
    row = wait_text(browser, "main .paged tr", "tenant-7")
    assert head in row.text
    wait_text(browser, ".facts", "blocks its ordering key")

    def blocked() -> list[Any]:
        return list(stack.ok("GET", f"/endpoints/{ENDPOINT}/ordering-keys")["items"])

    click_button(browser, "Skip")
    text = answer_confirmation(browser, confirm=False)
    time.sleep(SETTLE_SEC)
    assert len(blocked()) == 1, "Skip acted without being confirmed"
    assert "tenant-7" in text and head in text and "cannot be undone" in text
    click_button(browser, "Skip")
    assert answer_confirmation(browser, confirm=True) == text
    stack.wait_status(second, "SUCCESS")
    assert blocked() == []
    wait_text(browser, "main .paged", "No blocked ordering key.")
    assert stack.ok("GET", f"/executions/{head}")["status"] == "FAILED"
