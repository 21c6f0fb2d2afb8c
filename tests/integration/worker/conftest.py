"""Worker fixtures: a worker wired to the test database with settings built in-process."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from chalicelib.db.connection import Database
from chalicelib.wiring.worker import build_worker
from chalicelib.worker import Worker
from tests.support.seed.worker import BOX
from tests.support.worker_runs import settings


@pytest.fixture
def make_worker(database: Database) -> Iterator[Callable[..., Worker]]:
    """Build workers on the test database; closed at the end of the test."""
    built: list[Worker] = []

    def make(**overrides: Any) -> Worker:
        kwargs = {
            k: overrides.pop(k)
            for k in ("worker_id", "rand", "dispatchers", "tracing", "clock")
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
