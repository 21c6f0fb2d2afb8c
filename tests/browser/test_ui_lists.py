"""Lists past their first page, filters as choices, the endpoint page and one health.

Every list of the dashboard pages with the API's cursors (50 a page): jobs, failed
executions, a batch's jobs, a job's executions, endpoints. Each test seeds more than a
page and walks Next and Previous, comparing what is shown with what the API lists.
"""

from __future__ import annotations

import base64
from typing import Any

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from tests.browser.pages import click_link, go, sign_in, wait_text, wait_visible
from tests.support.browser_stack import Stack
from tests.support.served import HttpTarget, Reply

PAGE = 50
MANY = "ui-many"
#: A Standard Webhooks key (whsec_ + base64 of 32 bytes); the page must never show it.
SIGNING_VALUE = "whsec_" + base64.b64encode(b"the-dashboard-never-shows-this!!").decode()


def _endpoint(stack: Stack, name: str, url: str, **extra: Any) -> None:
    policy = {"max_attempts": 1, "backoff": "fixed", "initial_delay_ms": 100, "max_delay_ms": 100}
    body = {"name": name, "type": "HTTP", "spec": {"url": url, "method": "POST"}}
    stack.ok("POST", "/endpoints", {**body, "retry_policy": policy, **extra})


def _failing_batch(stack: Stack, target: HttpTarget, count: int) -> dict[str, Any]:
    """``count`` one-shot jobs of MANY in one batch, each failed on its only attempt."""
    target.script("/many", Reply(500, "no"))
    _endpoint(stack, MANY, target.url("/many"))
    jobs = [
        {"endpoint": MANY, "trigger": "IMMEDIATE", "idempotency_key": f"m{i}"} for i in range(count)
    ]
    batch = dict(stack.ok("POST", "/jobs/batch", {"jobs": jobs}))
    stack.wait_for(
        lambda: stack.ok("GET", f"/batches/{batch['batch_id']}")["counts"].get("FAILED") == count,
        f"{count} failed executions",
    )
    return batch


def _api_ids(stack: Stack, path: str, field: str) -> list[str]:
    """Every item's ``field`` of an API list, following its cursors."""
    ids: list[str] = []
    cursor = None
    while True:
        sep = "&" if "?" in path else "?"
        page = stack.ok("GET", f"{path}{sep}limit=200" + (f"&cursor={cursor}" if cursor else ""))
        ids += [item[field] for item in page["items"]]
        cursor = page["cursor"]
        if not cursor:
            return ids


def _shown(browser: Any, scope: str) -> list[str]:
    """The first cell of each row of the list in ``scope``."""
    cells = browser.find_elements(By.CSS_SELECTOR, f"{scope} .paged tbody tr td:first-child")
    return [cell.text for cell in cells]


def _turn(browser: Any, scope: str, label: str, page: int) -> None:
    wait_visible(browser, f"{scope} .pager")
    browser.find_element(By.CSS_SELECTOR, f"{scope} .pager .{label}").click()
    wait_text(browser, f"{scope} .page-no", f"Page {page}")


def _walk(browser: Any, scope: str, expected: list[str]) -> None:
    """Page 1, Next (page 2 ends the list: Next disabled), Previous: what the API lists."""
    wait_text(browser, f"{scope} .page-no", "Page 1")
    first = _shown(browser, scope)
    assert first == expected[:PAGE]
    _turn(browser, scope, "next", 2)
    assert _shown(browser, scope) == expected[PAGE : 2 * PAGE]
    assert not browser.find_element(By.CSS_SELECTOR, f"{scope} .pager .next").is_enabled()
    _turn(browser, scope, "previous", 1)
    assert _shown(browser, scope) == first


def test_every_list_pages_past_its_first_page(
    stack: Stack, target: HttpTarget, browser: Any
) -> None:
    batch = _failing_batch(stack, target, PAGE + 10)
    target.script("/ticks", Reply(200, "ok"))
    _endpoint(stack, "ui-ticks", target.url("/ticks"))
    cron = stack.ok(
        "POST",
        "/jobs",
        {"endpoint": "ui-ticks", "trigger": "CRON", "cron": "0 3 * * *", "timezone": "UTC"},
    )
    for _ in range(PAGE + 1):
        stack.ok("POST", f"/jobs/{cron['job_id']}/trigger")
    for i in range(PAGE):
        _endpoint(stack, f"ui-extra-{i:02d}", target.url("/extra"))
    sign_in(browser, stack.base, stack.key)

    go(browser, f"#/jobs?endpoint={MANY}")
    jobs = _api_ids(stack, f"/jobs?endpoint={MANY}", "job_id")
    assert len(jobs) == PAGE + 10
    _walk(browser, "main", jobs)

    go(browser, f"#/batch/{batch['batch_id']}")
    children = _api_ids(stack, f"/batches/{batch['batch_id']}/jobs", "job_id")
    assert len(children) == PAGE + 10
    _walk(browser, "main", children)

    failed = _api_ids(stack, f"/executions?status=FAILED&endpoint={MANY}", "execution_id")
    assert len(failed) == PAGE + 10
    go(browser, f"#/executions?status=FAILED&endpoint={MANY}")
    _walk(browser, "main", failed)
    go(browser, f"#/endpoint/{MANY}")  # its failed executions, the page's first section
    _walk(browser, "main section:first-of-type", failed)

    go(browser, f"#/job/{cron['job_id']}")
    runs = _api_ids(stack, f"/jobs/{cron['job_id']}/executions", "execution_id")
    assert len(runs) == PAGE + 1
    _walk(browser, "section:nth-of-type(1)", runs)

    go(browser, "#/endpoints")
    _walk(browser, "main", _api_ids(stack, "/endpoints", "name"))


def _options(browser: Any, css: str) -> list[str]:
    return [o.get_attribute("value") for o in Select(wait_visible(browser, css)).options]


STATUSES = ["", "PENDING", "QUEUED", "RUNNING", "RETRYING", "SUCCESS", "FAILED", "CANCELLED"]


def test_filters_offer_the_api_values_and_filter_by_them(
    stack: Stack, target: HttpTarget, browser: Any
) -> None:
    if stack.call("GET", f"/endpoints/{MANY}")[0] == 404:
        _failing_batch(stack, target, 3)
    target.script("/fine", Reply(200, "ok"))
    _endpoint(stack, "ui-fine", target.url("/fine"))
    body = {"endpoint": "ui-fine", "trigger": "IMMEDIATE", "idempotency_key": "fine"}
    fine = stack.execution_of(stack.ok("POST", "/jobs", body))
    stack.wait_status(fine, "SUCCESS")
    batches = stack.ok("POST", "/jobs/batch", {"jobs": [body | {"idempotency_key": "fine-2"}]})
    stack.wait_status(batches["items"][0]["job"]["execution"]["execution_id"], "SUCCESS")
    sign_in(browser, stack.base, stack.key)

    go(browser, "#/executions")
    assert _options(browser, "select[name=status]") == STATUSES
    assert "HTTP_ERROR" in _options(browser, "select[name=error_type]")
    assert not browser.find_elements(By.CSS_SELECTOR, "input[name=status], input[name=error_type]")
    wait_text(browser, "h1", "Executions: FAILED")
    assert fine not in browser.find_element(By.TAG_NAME, "main").text
    # "any status": every execution, the successful one included.
    Select(wait_visible(browser, "select[name=status]")).select_by_value("")
    browser.find_element(By.CSS_SELECTOR, ".filters button").click()
    wait_text(browser, "h1", "Executions: any status")
    wait_text(browser, "main .paged", fine)
    Select(wait_visible(browser, "select[name=status]")).select_by_value("SUCCESS")
    browser.find_element(By.CSS_SELECTOR, ".filters button").click()
    wait_text(browser, "h1", "Executions: SUCCESS")
    wait_text(browser, "main .paged", fine)
    assert "FAILED" not in browser.find_element(By.CSS_SELECTOR, "main .paged").text

    go(browser, "#/jobs")
    assert _options(browser, "select[name=trigger]") == ["", "IMMEDIATE", "DELAYED", "CRON"]
    assert _options(browser, "select[name=status]") == ["", "ACTIVE", "RETIRED"]

    # A batch's jobs by their execution's status.
    go(browser, f"#/batch/{batches['batch_id']}")
    assert _options(browser, "select[name=status]") == STATUSES
    Select(wait_visible(browser, "select[name=status]")).select_by_value("FAILED")
    browser.find_element(By.CSS_SELECTOR, ".filters button").click()
    wait_text(browser, "main", "No job with a FAILED execution.")
    Select(wait_visible(browser, "select[name=status]")).select_by_value("SUCCESS")
    browser.find_element(By.CSS_SELECTOR, ".filters button").click()
    wait_text(browser, "main .paged", batches["items"][0]["job"]["job_id"])


def test_endpoint_page_shows_its_settings_and_never_a_secret(
    stack: Stack, target: HttpTarget, browser: Any
) -> None:
    stack.ok("POST", "/secrets", {"name": "ui-signer", "value": SIGNING_VALUE})
    url = target.url("/settings").replace("http://", "http://robot:pa55word@") + "?token=t0ken"
    stack.ok(
        "POST",
        "/endpoints",
        {
            "name": "ui-settings",
            "type": "HTTP",
            "spec": {
                "url": url,
                "method": "PUT",
                "timeout_ms": 2500,
                "headers": {"X-Api-Key": "literal-k3y"},
                "signing_secret": "ui-signer",
            },
            "retry_policy": {
                "max_attempts": 5,
                "backoff": "exponential",
                "initial_delay_ms": 500,
                "max_delay_ms": 8000,
            },
            "flow_control": {"rate_limit": {"limit": 10, "period_ms": 1000}, "max_concurrency": 3},
        },
    )
    sign_in(browser, stack.base, stack.key)
    go(browser, "#/endpoints")
    click_link(browser, "ui-settings")

    shown = wait_text(browser, ".facts", "Retry policy").text
    for expected in (
        "PUT http://***@127.0.0.1:",
        "/settings?token=***",
        "up to 5 attempts, exponential backoff from 500 ms to at most 8.0 s",
        "2.5 s",
        "on (secret ui-signer)",
        "at most 10 per 1.0 s; at most 3 at once (all workers)",
        "X-Api-Key (values not shown)",
        "running",
        "IDLE",
    ):
        assert expected in shown, (expected, shown)
    page = browser.page_source
    for secret in (SIGNING_VALUE, "pa55word", "t0ken", "literal-k3y"):
        assert secret not in page, secret

    browser.find_element(By.XPATH, "//main//button[text()='Pause']").click()
    wait_text(browser, ".facts", "PAUSED")
    assert stack.ok("GET", "/endpoints/ui-settings")["paused_at"] is not None


def test_an_endpoint_and_its_job_show_the_same_health(
    stack: Stack, target: HttpTarget, browser: Any
) -> None:
    """One failure in eleven executions: under 10 %, HEALTHY on every view (an endpoint
    used to be DEGRADED on any failed attempt)."""
    target.script("/mostly", Reply(500, "once"), Reply(200, "ok"))
    _endpoint(stack, "ui-mostly", target.url("/mostly"))
    cron = stack.ok(
        "POST",
        "/jobs",
        {"endpoint": "ui-mostly", "trigger": "CRON", "cron": "0 3 * * *", "timezone": "UTC"},
    )
    runs = [stack.ok("POST", f"/jobs/{cron['job_id']}/trigger") for _ in range(11)]
    outcomes = [stack.wait_status(r["execution_id"], "SUCCESS", "FAILED")["status"] for r in runs]
    assert sorted(outcomes).count("FAILED") == 1
    health = stack.ok("GET", f"/jobs/{cron['job_id']}/status")["health"]
    assert health == "HEALTHY"
    sign_in(browser, stack.base, stack.key)

    assert "HEALTHY" in wait_text(browser, "tr", "ui-mostly").text  # the overview
    go(browser, "#/endpoints")
    assert "HEALTHY" in wait_text(browser, "tr", "ui-mostly").text
    go(browser, "#/endpoint/ui-mostly")
    wait_text(browser, ".facts", "11 executions in the last 24 h: 10 succeeded, 1 failed")
    assert "HEALTHY" in browser.find_element(By.CSS_SELECTOR, ".facts").text
    go(browser, f"#/job/{cron['job_id']}")
    wait_text(browser, ".facts", "11 runs, 10 succeeded, 1 failed")
    assert "HEALTHY" in browser.find_element(By.CSS_SELECTOR, ".facts").text
