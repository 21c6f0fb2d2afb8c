"""The dashboard's browser tests: the local stack as a process (:class:`Stack`, ``python -m
chalicelib.local`` with a small JSON client for arranging data) and headless Chromium's
options (:func:`chromium_options`: kept on loopback, nothing downloaded)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.environment import BOOTSTRAP_KEY, ENCRYPTION_KEY, PROFILE
from tests.support.served import call_api, free_port
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
