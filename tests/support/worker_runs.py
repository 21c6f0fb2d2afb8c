"""Running a worker in a test: its settings (:func:`settings`, with the run's database
configuration), and driving it until executions end (:func:`settle`, one pass at a time;
:func:`run_until_delivered`, the ring on a thread)."""

from __future__ import annotations

import threading
import time
from typing import Any

from chalicelib.db.connection import Database
from chalicelib.settings import Settings
from chalicelib.worker import Worker
from tests.support.environment import PROFILE
from tests.support.seed.worker import statuses
from tests.support.waiting import wait_for

TERMINAL = ("SUCCESS", "FAILED")


def settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "worker_max_concurrent": 20,
        "worker_poll_interval_ms": 20,
        "allow_private_targets": True,
        # The run's database configuration (CockroachDB's in make test's second pass).
        **{name.removeprefix("TE_").lower(): value for name, value in PROFILE.items()},
    }
    values.update(overrides)
    return Settings(**values)


def settle(
    worker: Worker, db: Database, ids: list[str], *, timeout: float = 20.0
) -> dict[str, int]:
    """Claim and deliver until every execution in ``ids`` is SUCCESS or FAILED."""
    deadline = time.monotonic() + timeout
    while True:
        worker.run_once()
        worker.drain(10)
        counts = statuses(db, ids)
        if sum(counts.get(s, 0) for s in TERMINAL) == len(ids):
            return counts
        if time.monotonic() > deadline:
            raise AssertionError(f"executions not settled: {counts}")
        time.sleep(0.01)


def run_until_delivered(
    worker: Worker, db: Database, ids: list[str], *, timeout: float = 60
) -> None:
    """Run the worker's ring (:meth:`Worker.run`, on a thread: refills happen only while it
    runs) until every execution in ``ids`` is SUCCESS, then stop it."""
    stop = threading.Event()
    ring = threading.Thread(target=worker.run, args=(stop,))
    ring.start()
    try:
        wait_for(
            lambda: statuses(db, ids),
            f"{len(ids)} delivered",
            until=lambda counts: counts.get("SUCCESS", 0) == len(ids),
            timeout=timeout,
        )
    finally:
        stop.set()
        ring.join(10)
