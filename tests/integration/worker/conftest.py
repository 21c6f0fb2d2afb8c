"""Worker fixtures: a worker wired to the test database with settings built in-process."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from chalicelib.db.connection import Database
from chalicelib.settings import Settings
from chalicelib.worker import Worker, build_worker
from tests.conftest import PROFILE
from tests.support.seed.worker import BOX, statuses
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


@pytest.fixture
def make_worker(database: Database) -> Iterator[Callable[..., Worker]]:
    """Build workers on the test database; closed at the end of the test."""
    built: list[Worker] = []

    def make(**overrides: Any) -> Worker:
        kwargs = {
            k: overrides.pop(k)
            for k in ("worker_id", "rand", "dispatchers", "tracing")
            if k in overrides
        }
        kwargs.setdefault("rand", lambda: 0.5)  # no jitter: exact delays
        worker = build_worker(
            db=database, settings=settings(**overrides), secret_box=lambda: BOX, **kwargs
        )
        built.append(worker)
        return worker

    yield make
    for worker in built:
        worker.stop()
        worker.drain(5)
        worker.close()


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
