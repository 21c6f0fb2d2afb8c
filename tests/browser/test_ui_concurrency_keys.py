"""The dashboard shows an endpoint's limit per concurrency key on its page, and a job's
concurrency key on the job's page."""

from __future__ import annotations

from typing import Any

from tests.browser.pages import go, sign_in, wait_text
from tests.support.browser_stack import Stack
from tests.support.served import HttpTarget

ENDPOINT = "ui-per-tenant"


def test_the_endpoint_page_shows_the_per_key_limit_and_the_job_page_its_key(
    stack: Stack, target: HttpTarget, browser: Any
) -> None:
    stack.ok(
        "POST",
        "/endpoints",
        {
            "name": ENDPOINT,
            "type": "HTTP",
            "spec": {"url": target.url("/tenant"), "method": "POST"},
            "flow_control": {"max_concurrency_per_key": 3},
        },
    )
    job = {
        "endpoint": ENDPOINT,
        "trigger": "DELAYED",
        "delay": "1h",
        "idempotency_key": "t7",
        "concurrency_key": "tenant-7",
    }
    job_id = stack.ok("POST", "/jobs", job)["job_id"]
    sign_in(browser, stack.base, stack.key)
    go(browser, f"#/endpoint/{ENDPOINT}")
    wait_text(browser, ".facts", "at most 3 of one concurrency key at once")
    go(browser, f"#/job/{job_id}")
    wait_text(browser, ".facts", "tenant-7")
