"""Topics on the dashboard: the list names each topic's endpoints, and a topic's page lists
its endpoints in order, each linked to the endpoint's page."""

from __future__ import annotations

from typing import Any

from selenium.webdriver.common.by import By

from tests.browser.pages import click_link, go, sign_in, wait_text
from tests.support.browser_stack import Stack
from tests.support.served import HttpTarget


def test_a_topic_list_and_a_topics_page_list_its_endpoints(
    stack: Stack, target: HttpTarget, browser: Any
) -> None:
    for name in ("ui-topic-mail", "ui-topic-bill"):
        spec = {"url": target.url(f"/{name}"), "method": "POST"}
        stack.ok("POST", "/endpoints", {"name": name, "type": "HTTP", "spec": spec})
    endpoints = ["ui-topic-mail", "ui-topic-bill"]
    stack.ok("POST", "/topics", {"name": "ui-orders", "endpoints": endpoints})
    sign_in(browser, stack.base, stack.key)
    go(browser, "#/topics")

    row = wait_text(browser, "main .paged tr", "ui-orders")
    assert "ui-topic-mail, ui-topic-bill" in row.text
    click_link(browser, "ui-orders")
    wait_text(browser, "main h1", "Topic ui-orders")
    # The heading is drawn before the topic is read: wait for its rows.
    wait_text(browser, "main section tbody tr td:first-child", "ui-topic-bill")
    cells = browser.find_elements(By.CSS_SELECTOR, "main section tbody tr td:first-child")
    assert [cell.text for cell in cells] == endpoints
    click_link(browser, "ui-topic-bill")
    wait_text(browser, "main h1", "Endpoint ui-topic-bill")
