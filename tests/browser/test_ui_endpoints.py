"""The endpoint list: where each endpoint delivers (URL, Kafka topic, Redis stream), and
filters by health and by paused state, which the API applies (GET /endpoints?health=&paused=)."""

from __future__ import annotations

from typing import Any

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from tests.browser.pages import go, sign_in, wait_text, wait_visible
from tests.support.browser_stack import Stack
from tests.support.served import HttpTarget, Reply

ONE_TRY = {"max_attempts": 1, "backoff": "fixed", "initial_delay_ms": 100, "max_delay_ms": 100}
ENDPOINTS = {
    "ui-web": {"type": "HTTP", "spec": {"url": "/web", "method": "POST"}},
    "ui-down": {"type": "HTTP", "spec": {"url": "/down", "method": "PUT"}},
    "ui-kafka": {
        "type": "KAFKA",
        "spec": {"bootstrap_servers": "127.0.0.1:9092", "topic": "orders"},
    },
    "ui-redis": {
        "type": "REDIS_STREAM",
        "spec": {"redis_url": "redis://127.0.0.1:6379/0", "stream": "events"},
    },
}


def _arrange(stack: Stack, target: HttpTarget) -> None:
    target.script("/web", Reply(200, "ok"))
    target.script("/down", Reply(500, "down"))
    for name, body in ENDPOINTS.items():
        spec = dict(body["spec"])
        if "url" in spec:
            spec["url"] = target.url(spec["url"])
        stack.ok(
            "POST", "/endpoints", {"name": name, **body, "spec": spec, "retry_policy": ONE_TRY}
        )
    for name, outcome in (("ui-web", "SUCCESS"), ("ui-down", "FAILED")):
        job = {"endpoint": name, "trigger": "IMMEDIATE", "idempotency_key": name}
        stack.wait_status(stack.execution_of(stack.ok("POST", "/jobs", job)), outcome)
    stack.ok("POST", "/endpoints/ui-redis/pause")


def _rows(browser: Any) -> list[str]:
    cells = browser.find_elements(By.CSS_SELECTOR, "main .paged tbody tr td:first-child")
    return sorted(cell.text for cell in cells)


def _filter(browser: Any, *, health: str, paused: str, expected: list[str]) -> None:
    Select(wait_visible(browser, "select[name=health]")).select_by_value(health)
    Select(wait_visible(browser, "select[name=paused]")).select_by_value(paused)
    browser.find_element(By.CSS_SELECTOR, ".filters button").click()
    wait_text(browser, "main .paged", expected[0] if expected else "No endpoint matches.")
    shown = _rows(browser)
    assert shown == sorted(expected), (health, paused, shown)


def test_the_list_shows_each_target_and_filters_by_health_and_paused(
    stack: Stack, target: HttpTarget, browser: Any
) -> None:
    _arrange(stack, target)
    sign_in(browser, stack.base, stack.key)
    go(browser, "#/endpoints")

    assert "POST " + target.url("/web") in wait_text(browser, "tr", "ui-web").text
    assert "PUT " + target.url("/down") in wait_text(browser, "tr", "ui-down").text
    assert "topic orders on 127.0.0.1:9092" in wait_text(browser, "tr", "ui-kafka").text
    redis = wait_text(browser, "tr", "ui-redis").text
    assert "stream events on redis://127.0.0.1:6379/0" in redis and "PAUSED" in redis

    _filter(browser, health="FAILING", paused="", expected=["ui-down"])
    assert "health=FAILING" in browser.current_url
    _filter(browser, health="HEALTHY", paused="", expected=["ui-web"])
    _filter(browser, health="", paused="true", expected=["ui-redis"])
    _filter(browser, health="IDLE", paused="false", expected=["ui-kafka"])
    _filter(browser, health="DEGRADED", paused="", expected=[])
    _filter(browser, health="", paused="", expected=list(ENDPOINTS))


def test_a_paused_endpoint_shows_why_in_the_list_and_on_its_page(
    stack: Stack, target: HttpTarget, browser: Any
) -> None:
    target.script("/gone", Reply(410, "gone"))
    spec = {"url": target.url("/gone"), "method": "POST"}
    stack.ok("POST", "/endpoints", {"name": "ui-gone", "type": "HTTP", "spec": spec})
    stack.ok("POST", "/endpoints", {**ENDPOINTS["ui-web"], "name": "ui-held", "spec": spec})
    stack.ok("POST", "/endpoints/ui-held/pause")
    job = {"endpoint": "ui-gone", "trigger": "IMMEDIATE", "idempotency_key": "gone"}
    stack.wait_status(stack.execution_of(stack.ok("POST", "/jobs", job)), "FAILED")
    stack.wait_for(lambda: stack.ok("GET", "/endpoints/ui-gone")["paused_reason"] == "GONE", "GONE")
    sign_in(browser, stack.base, stack.key)
    go(browser, "#/endpoints")

    assert "PAUSED GONE" in wait_text(browser, "tr", "ui-gone").text
    assert "PAUSED OPERATOR" in wait_text(browser, "tr", "ui-held").text
    go(browser, "#/endpoint/ui-gone")
    page = wait_text(browser, "main", "its target answered 410 Gone").text
    assert "Auto-pause" in page and "after 5 days of failed attempts only" in page
