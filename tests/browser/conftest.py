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
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BOOTSTRAP_KEY, ENCRYPTION_KEY, PROFILE
from tests.support.pg import PgServer, migrated_database
from tests.support.served import HttpTarget, call_api, free_port
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
#: Debian's packages (`make browser`), or the ones on PATH (the nix shell's).
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
WAIT_SEC = 20.0


class Stack:
    """The local stack's process, its URL and a small JSON client for arranging data."""

    def __init__(
        self,
        db_url: str,
        data_dir: Path,
        *,
        settings: dict[str, str] | None = None,
        args: tuple[str, ...] = (),
    ) -> None:
        """``settings``: further ``TE_*`` variables; ``args``: of ``chalicelib.local``."""
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("TE_")}
        env.update(
            TE_DATABASE_URL=db_url,
            TE_BOOTSTRAP_API_KEY=BOOTSTRAP_KEY,
            TE_SECRET_ENCRYPTION_KEY=ENCRYPTION_KEY,
            TE_ALLOW_PRIVATE_TARGETS="true",
            TE_DATA_DIR=str(data_dir),
            TE_LISTEN_ADDR=f"127.0.0.1:{port}",
            TE_WORKER_POLL_INTERVAL_MS="100",
            PYTHONUNBUFFERED="1",
            **PROFILE,
        )
        env.update(settings or {})
        self.base = f"http://127.0.0.1:{port}"
        self.key = BOOTSTRAP_KEY
        self.output: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "chalicelib.local", *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self._wait_for_banner()
        threading.Thread(target=self._drain, daemon=True).start()

    def _wait_for_banner(self) -> None:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError("stack exited early:\n" + "".join(self.output))
            self.output.append(line)
            if line.startswith("API key: "):
                return
        raise AssertionError("no banner within 90 s:\n" + "".join(self.output))

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return call_api(self.base, self.key, method, path, body)

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        status, reply = self.call(method, path, body)
        assert status in (200, 201), (method, path, status, reply)
        return reply

    def wait_for(self, predicate: Callable[[], Any], what: str) -> Any:
        return wait_for(predicate, what, timeout=WAIT_SEC, interval=0.1)

    def execution_of(self, job: dict[str, Any]) -> str:
        return str(job["execution"]["execution_id"])

    def wait_status(self, execution_id: str, *statuses: str) -> dict[str, Any]:
        def done() -> dict[str, Any] | None:
            body = self.ok("GET", f"/executions/{execution_id}")
            return body if body["status"] in statuses else None

        return dict(self.wait_for(done, f"{execution_id} in {statuses}"))

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


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


def chromium_options(width: int, height: int) -> Any:
    from selenium.webdriver.chrome.options import Options

    options = Options()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",  # root in CI
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={width},{height}",
        "--hide-scrollbars",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-default-apps",
        "--disable-extensions",
        "--disable-domain-reliability",
        "--disable-client-side-phishing-detection",
        "--no-pings",
        "--metrics-recording-only",
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
        "--proxy-server=http://127.0.0.1:9",
        "--force-device-scale-factor=1",
    ):
        options.add_argument(flag)
    return options


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
