"""What the dashboard shows, read off the rendered page: nothing of the signed-in interface
while signed out, and the failed list's buttons on one line at 1280 px."""

from __future__ import annotations

from typing import Any

from selenium.webdriver.common.by import By

from tests.browser.pages import click_button, go, sign_in, wait_text, wait_visible
from tests.support.browser_stack import Stack
from tests.support.served import HttpTarget, Reply

#: Every part of the page that belongs to a signed-in session.
SIGNED_IN_PARTS = ("#nav", "#nav a", "#logout", "main#view *", "dialog#confirm")

#: How many lines of text each element matching the selector occupies (its text's line
#: boxes, counted by their distinct tops).
LINES = """
return Array.from(document.querySelectorAll(arguments[0])).map((el) => {
  const range = document.createRange();
  range.selectNodeContents(el);
  const tops = new Set(Array.from(range.getClientRects()).map((r) => Math.round(r.top)));
  return [el.textContent, tops.size];
});
"""


def _shown(browser: Any) -> list[str]:
    return [
        css
        for css in SIGNED_IN_PARTS
        if any(e.is_displayed() for e in browser.find_elements(By.CSS_SELECTOR, css))
    ]


def test_nothing_of_the_signed_in_interface_shows_signed_out(stack: Stack, browser: Any) -> None:
    browser.get(stack.base + "/ui")
    browser.execute_script("sessionStorage.clear()")
    browser.get(stack.base + "/ui#/endpoints")
    wait_visible(browser, "#login")
    assert _shown(browser) == []

    sign_in(browser, stack.base, stack.key)
    assert "#nav" in _shown(browser)
    click_button(browser, "Forget key")
    wait_visible(browser, "#login")
    assert _shown(browser) == []


def test_the_failed_list_keeps_each_button_on_one_line_at_1280_px(
    stack: Stack, target: HttpTarget, browser: Any
) -> None:
    long_error = "upstream refused the delivery: " + "no capacity left " * 12
    target.script("/cramped", Reply(500, long_error))
    policy = {"max_attempts": 1, "backoff": "fixed", "initial_delay_ms": 100, "max_delay_ms": 100}
    name = "ui-a-rather-long-endpoint-name-for-the-failed-list"
    stack.ok(
        "POST",
        "/endpoints",
        {
            "name": name,
            "type": "HTTP",
            "spec": {"url": target.url("/cramped"), "method": "POST"},
            "retry_policy": policy,
        },
    )
    ids = []
    for key in ("c1", "c2"):
        job = stack.ok(
            "POST", "/jobs", {"endpoint": name, "trigger": "IMMEDIATE", "idempotency_key": key}
        )
        ids.append(stack.execution_of(job))
    for execution_id in ids:
        stack.wait_status(execution_id, "FAILED")
    sign_in(browser, stack.base, stack.key)
    browser.set_window_size(1280, 900)

    go(browser, "#/executions?status=FAILED")
    for execution_id in ids:
        wait_text(browser, "tr", execution_id)
    buttons = browser.execute_script(LINES, "main button")
    assert [text for text, _ in buttons].count("Retry") >= 2
    wrapped = [(text, lines) for text, lines in buttons if lines > 1]  # 0: not shown
    assert wrapped == [], f"buttons wrapped at 1280 px: {wrapped}"
    # The ids and the finish time read whole too: each cell of theirs is one line.
    cells = browser.execute_script(LINES, "main tbody td:nth-child(1), main tbody td:nth-child(5)")
    assert [(text, lines) for text, lines in cells if lines > 1] == []
    overflow = browser.execute_script(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 1
