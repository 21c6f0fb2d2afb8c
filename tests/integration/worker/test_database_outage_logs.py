"""A worker whose database is down logs one traceback, not one per poll.

The review counted 4,382 tracebacks in 3.5 minutes of outage. Here the database is a
loopback port nobody listens on, and the worker polls every 10 ms for two seconds.
"""

from __future__ import annotations

import logging
import threading

import pytest

from chalicelib.db.connection import Database
from chalicelib.wiring.worker import build_worker
from tests.support.seed.worker import BOX
from tests.support.served import free_port

#: The claim or the wake-up decides what these tests see: make test runs them again in
#: CockroachDB's configuration (test-cockroach).
pytestmark = pytest.mark.claim_path


def test_a_database_outage_is_logged_once_then_counted(
    app_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from chalicelib.settings import load_settings

    monkeypatch.setenv("TE_WORKER_POLL_INTERVAL_MS", "10")
    monkeypatch.setenv("TE_WAKEUP_NOTIFY", "off")
    down = Database.from_url(f"postgresql://postgres@127.0.0.1:{free_port()}/nowhere")
    worker = build_worker(db=down, settings=load_settings(), secret_box=lambda: BOX)
    stop = threading.Event()
    with caplog.at_level(logging.INFO):
        runner = threading.Thread(target=worker.run, args=(stop,))
        runner.start()
        stop.wait(2.0)
        stop.set()
        runner.join(10)
        worker.stop()
    with_traceback = [r for r in caplog.records if r.exc_info]
    failing = [r for r in caplog.records if getattr(r, "event", None) == "failing"]
    assert len(failing) == 1 and failing[0].exc_info is not None
    assert len(with_traceback) == 1, [r.getMessage()[:80] for r in with_traceback]
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) <= 2, [r.getMessage()[:80] for r in warnings]
