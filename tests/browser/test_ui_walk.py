"""The dashboard walked in headless Chromium against the real stack with real deliveries.

Overview -> why an execution failed in two clicks; endpoints, jobs (filters),
job (versions, health, next run, executions), execution (attempt timeline to scale, error,
logs, output, cancel), batches (progress); the key kept in session storage only; hostile
text shown as text and never run; usable at 390 px.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from tests.browser.pages import (
    TITLE,
    answer_confirmation,
    click_button,
    click_link,
    go,
    no_alert,
    screenshot,
    sign_in,
    wait_text,
    wait_visible,
)
from tests.support.browser_stack import Stack
from tests.support.served import HttpTarget, Reply

GOOD = "ui-good"
FLAKY = "ui-flaky"


def _endpoint(stack: Stack, name: str, url: str, attempts: int = 1) -> None:
    policy = {"max_attempts": attempts, "backoff": "fixed", "initial_delay_ms": 300}
    policy["max_delay_ms"] = 300
    body = {"name": name, "type": "HTTP", "spec": {"url": url, "method": "POST"}}
    stack.ok("POST", "/endpoints", {**body, "retry_policy": policy})


def _immediate(stack: Stack, endpoint: str, key: str, data: Any = None) -> dict[str, Any]:
    body = {"endpoint": endpoint, "trigger": "IMMEDIATE", "idempotency_key": key}
    return dict(stack.ok("POST", "/jobs", {**body, "input": data or {"n": key}}))


def _at(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _arrange_failure(stack: Stack, target: HttpTarget) -> str:
    """Five deliveries that succeed, and one execution that fails all three attempts."""
    target.script("/good", Reply(200, '{"delivered": true}', delay=0.05))
    target.script("/flaky", Reply(503, "upstream down", delay=0.2))
    _endpoint(stack, GOOD, target.url("/good"))
    _endpoint(stack, FLAKY, target.url("/flaky"), attempts=3)
    done = [stack.execution_of(_immediate(stack, GOOD, f"ok-{i}")) for i in range(5)]
    failed = stack.execution_of(_immediate(stack, FLAKY, "will-fail"))
    for execution_id in done:
        stack.wait_status(execution_id, "SUCCESS")
    stack.wait_status(failed, "FAILED")
    return failed


def test_two_clicks_from_overview_to_why_an_execution_failed(
    stack: Stack, target: HttpTarget, browser: Any, artifacts: Path
) -> None:
    failed = _arrange_failure(stack, target)
    sign_in(browser, stack.base, stack.key)

    # The overview: counts by status, the last hour's chart, workers seen, endpoint health.
    wait_text(browser, ".card.s-failed", "1")
    wait_text(browser, ".card.s-success", "5")
    chart = wait_visible(browser, ".chart-box")
    assert int(chart.get_attribute("data-attempts")) == 8  # 5 deliveries + 3 failed attempts
    assert len(browser.find_elements(By.CSS_SELECTOR, ".chart rect.bad")) == 60
    wait_text(browser, "td", "worker@")
    wait_text(browser, "tr", FLAKY)
    assert "FAILING" in wait_text(browser, "tr", FLAKY).text
    assert "HEALTHY" in wait_text(browser, "tr", GOOD).text
    screenshot(browser, artifacts, "dashboard-overview")
    browser.set_window_size(1280, 900)
    # It refreshes itself: a second failure shows up without a reload or a click.
    stack.wait_status(stack.execution_of(_immediate(stack, FLAKY, "fails-too")), "FAILED")
    wait_text(browser, ".card.s-failed", "2")

    # The key: typed once, kept in this tab's session storage, never in a URL or a cookie.
    assert browser.execute_script("return sessionStorage.getItem('te_api_key')") == stack.key
    assert browser.execute_script("return document.cookie") == ""
    assert browser.execute_script("return localStorage.length") == 0
    assert stack.key not in browser.current_url

    click_link(browser, FLAKY)  # 1: the failing endpoint's page, with its failed executions
    click_link(browser, failed)  # 2: its FAILED execution
    why = wait_text(browser, ".why", "HTTP_ERROR")
    assert "503" in why.text
    # The timeline: three failed attempts drawn to scale (each bar's width is its duration).
    bars = browser.find_elements(By.CSS_SELECTOR, ".timeline .a-failed rect")
    assert len(bars) == 3
    widths = [float(bar.get_attribute("width")) for bar in bars]
    xs = [float(bar.get_attribute("x")) for bar in bars]
    assert xs == sorted(xs) and xs[0] < xs[1] < xs[2]  # later attempts start further right
    # To scale: each bar's width is its attempt's share of the whole span (the drawing's
    # width less the 40 px of labels on the left and a 4 px margin on the right).
    drawing = browser.find_element(By.CSS_SELECTOR, ".timeline")
    plot = float(drawing.get_dom_attribute("viewBox").split()[2]) - 44
    attempts = stack.ok("GET", f"/executions/{failed}/attempts")["items"]
    starts = [_at(a["started_at"]) for a in attempts]
    ends = [_at(a["completed_at"]) for a in attempts]
    span = max(ends) - min(starts)
    for width, start, end in zip(widths, starts, ends, strict=True):
        assert abs(width - max(2.0, plot * (end - start) / span)) < 1.5
    wait_text(browser, "td", "upstream down")  # the target's own words, in the attempts
    assert browser.current_url.endswith(f"#/execution/{failed}")
    screenshot(browser, artifacts, "dashboard-execution")
    browser.set_window_size(1280, 900)


def test_endpoints_jobs_job_batch_views_and_cancel(
    stack: Stack, target: HttpTarget, browser: Any
) -> None:
    target.script("/good", Reply(200, "ok"))
    if stack.call("GET", f"/endpoints/{GOOD}")[0] == 404:
        _endpoint(stack, GOOD, target.url("/good"))
    cron = stack.ok(
        "POST",
        "/jobs",
        {"endpoint": GOOD, "trigger": "CRON", "cron": "0 3 * * *", "timezone": "UTC"},
    )
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    delayed = stack.ok(
        "POST",
        "/jobs",
        {"endpoint": GOOD, "trigger": "DELAYED", "idempotency_key": "later", "run_at": later},
    )
    batch = stack.ok(
        "POST",
        "/jobs/batch",
        {
            "jobs": [
                {"endpoint": GOOD, "trigger": "IMMEDIATE", "idempotency_key": f"b{i}"}
                for i in range(3)
            ]
        },
    )
    sign_in(browser, stack.base, stack.key)

    go(browser, "#/endpoints")
    row = wait_text(browser, "tr", GOOD)
    assert "HTTP" in row.text and "running" in row.text

    click_link(browser, GOOD)  # its page
    wait_text(browser, ".facts", "POST " + target.url("/good"))
    click_link(browser, "Its jobs")
    Select(wait_visible(browser, "select[name=trigger]")).select_by_value("CRON")
    browser.find_element(By.CSS_SELECTOR, ".filters button").click()
    wait_text(browser, "tbody", cron["job_id"])
    assert delayed["job_id"] not in browser.find_element(By.TAG_NAME, "tbody").text

    click_link(browser, cron["job_id"])  # the cron job: schedule, next run, health, versions
    facts = wait_text(browser, ".facts", "0 3 * * *")
    assert "Next run" in facts.text and "Health" in facts.text and "Last 24 h" in facts.text
    wait_text(browser, "section", "Versions")

    # A delayed job's PENDING execution, cancelled from its page.
    go(browser, f"#/job/{delayed['job_id']}")
    click_link(browser, stack.execution_of(delayed))
    click_button(browser, "Cancel")
    answer_confirmation(browser, confirm=True)
    wait_text(browser, ".facts", "CANCELLED")
    assert stack.ok("GET", f"/executions/{stack.execution_of(delayed)}")["status"] == "CANCELLED"

    go(browser, f"#/batch/{batch['batch_id']}")
    wait_text(browser, ".progress-text", "3 / 3 done")
    assert browser.find_elements(By.CSS_SELECTOR, ".progress .p-success")


HOSTILE = [
    "<script>document.title='pwned';window.__xss=1</script>",
    '"><img src=x onerror="document.title=\'pwned\';window.__xss=1">',
]


def test_hostile_text_is_shown_as_text_and_never_runs(
    stack: Stack, target: HttpTarget, browser: Any
) -> None:
    target.script("/evil", Reply(500, "".join(HOSTILE), headers={"Content-Type": "text/html"}))
    _endpoint(stack, "ui-evil", target.url("/evil"))
    job = _immediate(stack, "ui-evil", HOSTILE[1], {"name": HOSTILE[0], HOSTILE[1]: HOSTILE[1]})
    execution_id = stack.execution_of(job)
    stack.wait_status(execution_id, "FAILED")
    sign_in(browser, stack.base, stack.key)

    go(browser, f"#/execution/{execution_id}")
    wait_text(browser, ".why", HOSTILE[0])  # the target's response, as text
    wait_text(browser, "pre", "<img src=x onerror=")  # the input (JSON-quoted), as text
    go(browser, f"#/job/{job['job_id']}")
    wait_text(browser, "pre", HOSTILE[0])
    wait_text(browser, ".facts", HOSTILE[1])  # the idempotency key
    go(browser, "#/jobs")
    field = wait_visible(browser, "input[name=endpoint]")
    field.send_keys(HOSTILE[1])
    browser.find_element(By.CSS_SELECTOR, ".filters button").click()
    wait_text(browser, "h1", HOSTILE[1])  # the filter typed in, echoed as text
    wait_text(browser, "main", "No job matches.")
    go(browser, "#/overview")
    wait_text(browser, "tr", "ui-evil")

    assert browser.title == TITLE
    assert browser.execute_script("return window.__xss") is None
    assert no_alert(browser)
    assert not browser.find_elements(By.CSS_SELECTOR, "main img, main script")


def test_usable_at_390_px(stack: Stack, target: HttpTarget, browser: Any, artifacts: Path) -> None:
    target.script("/phone", Reply(502, "bad gateway " * 20))
    _endpoint(stack, "ui-phone", target.url("/phone"), attempts=2)
    job = _immediate(stack, "ui-phone", "on-a-phone")
    execution_id = stack.execution_of(job)
    stack.wait_status(execution_id, "FAILED")
    sign_in(browser, stack.base, stack.key)
    browser.set_window_size(390, 844)
    try:
        for view, shown in (
            ("#/overview", ".chart"),
            ("#/endpoints", "main .scroll"),
            ("#/endpoint/ui-phone", ".facts"),
            ("#/jobs?endpoint=ui-phone", "main .scroll"),
            (f"#/job/{job['job_id']}", ".facts"),
            (f"#/execution/{execution_id}", ".timeline"),
        ):
            go(browser, view)
            wait_visible(browser, shown)
            overflow = browser.execute_script(
                "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            assert overflow <= 1, f"{view} is wider than the 390 px screen by {overflow} px"
        screenshot(browser, artifacts, "dashboard-phone-execution")
    finally:
        browser.set_window_size(1280, 900)


def test_a_refused_key_asks_again_and_forget_key_forgets_it(stack: Stack, browser: Any) -> None:
    sign_in(browser, stack.base, "not-the-key", expect_nav=False)
    wait_text(browser, "#notice", "The API key was refused.")
    wait_visible(browser, "#login")
    assert browser.execute_script("return sessionStorage.getItem('te_api_key')") is None

    sign_in(browser, stack.base, stack.key)
    click_button(browser, "Forget key")
    wait_visible(browser, "#login")
    assert browser.execute_script("return sessionStorage.length") == 0
