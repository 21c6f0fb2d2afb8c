"""The real local stack for CLI tests: the app on Chalice's local HTTP server (as `make run`
serves it) on a loopback port, a worker delivering in a thread, one test database; ``te``
run through click's CliRunner with TE_URL and TE_API_KEY pointing at it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import Te
from tests.support.roots import Roots
from tests.support.served import free_port


@pytest.fixture
def stack(chalice_app: Any, roots: Roots, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Base URL of the app served over loopback HTTP, with a worker running beside it."""
    monkeypatch.setenv("TE_WORKER_POLL_INTERVAL_MS", "50")
    monkeypatch.setenv("TE_API_KEY_CACHE_TTL_SEC", "0")  # a revoked key stops at once
    from chalicelib import wakeup
    from chalicelib.local.server import ApiServerPart, make_api_server
    from chalicelib.runtime.process import ProcessRunner
    from chalicelib.wiring import worker

    port = free_port()
    process = roots.current
    server = make_api_server(chalice_app, "127.0.0.1", port)
    worker_part = worker.long_lived_part(process)
    unregister = wakeup.register(worker_part.worker.nudge)
    runner = ProcessRunner([ApiServerPart(server), worker_part], name="stack", join_timeout=30)
    running = threading.Thread(target=runner.run, daemon=True)
    running.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        runner.stop()
        running.join(timeout=40)
        unregister()
        server.server.server_close()


@pytest.fixture
def te(stack: str, tmp_path: Path) -> Te:
    return Te(stack, tmp_path)
