"""What the browser tests do with the dashboard: sign in, go to a view, wait, click, look."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from selenium.common.exceptions import NoAlertPresentException, TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

WAIT_SEC = 20.0
TITLE = "Task Executor"


def sign_in(driver: Any, base: str, key: str, *, expect_nav: bool = True) -> None:
    """Open /ui in a fresh tab state and type the key once."""
    driver.get(base + "/ui")
    driver.execute_script("sessionStorage.clear()")
    driver.get(base + "/ui#/overview")
    field = wait_visible(driver, "#key")
    field.send_keys(key)
    driver.find_element(By.CSS_SELECTOR, "#login button").click()
    if expect_nav:
        wait_visible(driver, "#nav")


def go(driver: Any, hash_path: str) -> None:
    driver.execute_script("location.hash = arguments[0]", hash_path)


def wait_visible(driver: Any, css: str) -> WebElement:
    def found(d: Any) -> WebElement | bool:
        elements = [e for e in d.find_elements(By.CSS_SELECTOR, css) if e.is_displayed()]
        return elements[0] if elements else False

    element: WebElement = WebDriverWait(driver, WAIT_SEC, poll_frequency=0.1).until(
        found, f"{css} never visible"
    )
    return element


def wait_text(driver: Any, css: str, text: str) -> WebElement:
    """The first element matching ``css`` whose text contains ``text`` (refreshes included)."""

    def found(d: Any) -> WebElement | bool:
        for element in d.find_elements(By.CSS_SELECTOR, css):
            try:
                if text in element.text:
                    return element
            except Exception:  # noqa: S112 - replaced by a refresh while read: look again
                continue
        return False

    try:
        element: WebElement = WebDriverWait(driver, WAIT_SEC, poll_frequency=0.1).until(found)
    except TimeoutException:
        page = driver.find_element(By.TAG_NAME, "main").text
        raise AssertionError(
            f"no {css} containing {text!r} within {WAIT_SEC} s; notice: {notice(driver)!r};"
            f" page:\n{page}"
        ) from None
    return element


def click_link(driver: Any, text: str) -> None:
    """Click the link whose text contains ``text`` (waiting for a refresh to show it)."""

    def clicked(d: Any) -> bool:
        for element in d.find_elements(By.PARTIAL_LINK_TEXT, text):
            try:
                element.click()
                return True
            except Exception:  # noqa: S112 - a refresh replaced it under the click
                continue
        return False

    WebDriverWait(driver, WAIT_SEC, poll_frequency=0.1).until(clicked, f"no link {text!r}")


def click_button(driver: Any, label: str) -> None:
    def clicked(d: Any) -> bool:
        for element in d.find_elements(By.TAG_NAME, "button"):
            try:
                if element.text == label and element.is_displayed() and element.is_enabled():
                    element.click()
                    return True
            except Exception:  # noqa: S112 - a refresh replaced it under the click
                continue
        return False

    WebDriverWait(driver, WAIT_SEC, poll_frequency=0.1).until(clicked, f"no button {label!r}")


def answer_confirmation(driver: Any, *, confirm: bool, escape: bool = False) -> str:
    """Answer the confirmation the last click opened (its confirm button, its keep button,
    or Escape) and wait for it to close; the dialog's text."""
    dialog = wait_visible(driver, "dialog#confirm")
    text = str(dialog.text)
    if escape:
        dialog.send_keys(Keys.ESCAPE)
    else:
        driver.find_element(By.ID, "confirm-yes" if confirm else "confirm-keep").click()
    WebDriverWait(driver, WAIT_SEC, poll_frequency=0.1).until(
        lambda d: not d.find_element(By.ID, "confirm").is_displayed(), "the dialog stays open"
    )
    return text


def confirmation_open(driver: Any) -> bool:
    return bool(driver.find_element(By.ID, "confirm").is_displayed())


def notice(driver: Any) -> str:
    return str(driver.find_element(By.ID, "notice").text)


def no_alert(driver: Any) -> bool:
    try:
        _ = driver.switch_to.alert
    except NoAlertPresentException:
        return True
    return False


def screenshot(driver: Any, directory: Path, name: str) -> Path:
    path = directory / f"{name}.png"
    # The whole page, not only the viewport: resize to the document's height first.
    height = driver.execute_script("return document.documentElement.scrollHeight")
    width = driver.get_window_size()["width"]
    driver.set_window_size(width, max(600, min(int(height) + 40, 2400)))
    driver.save_screenshot(str(path))
    return path
