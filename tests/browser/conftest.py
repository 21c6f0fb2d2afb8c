"""The dashboard in a real browser against the real stack.

One stack per module: ``python -m chalicelib.local`` (API + worker + scheduler, as `make run`
starts them) on a database of the test PostgreSQL server, delivering to a real HTTP target
on loopback. Headless Chromium from Debian's packages (``make browser`` installs
``chromium`` and ``chromium-driver``; the nix shell has its own on PATH) is driven by
Selenium through ``chromedriver`` with Selenium Manager offline, so nothing is downloaded.
Chromium is kept on loopback: every host name but 127.0.0.1 fails to resolve and anything
else would go to a dead loopback proxy.

Screenshots go to a temporary directory (printed in the test's output), or to
``TE_UI_SCREENSHOT_DIR`` when `make screenshots` regenerates the README's.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser_stack import CHROMEDRIVER, CHROMIUM, Stack, chromium_options
from tests.support.pg import PgServer, migrated_database
from tests.support.served import HttpTarget


@pytest.fixture(scope="module")
def target() -> Iterator[HttpTarget]:
    server = HttpTarget()
    yield server
    server.close()


@pytest.fixture(scope="module")
def stack(pg_server: PgServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with migrated_database(pg_server, "te_ui_") as url:
        running = Stack(url, tmp_path_factory.mktemp("ui-stack") / "data")
        try:
            yield running
        finally:
            running.stop()


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where screenshots go: a temp dir, or the README's docs/ under `make screenshots`."""
    chosen = os.environ.get("TE_UI_SCREENSHOT_DIR")
    path = Path(chosen) if chosen else tmp_path_factory.mktemp("ui-artifacts")
    print(f"\nbrowser screenshots: {path}")
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium at 1280 px wide; tests that resize put it back."""
    assert Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists(), (
        "chromium and chromium-driver are missing: run `make browser`"
    )
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must never download anything
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    driver = webdriver.Chrome(
        service=Service(executable_path=CHROMEDRIVER), options=chromium_options(1280, 900)
    )
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()
