"""The worker's background loops: heartbeat (DEAD at shutdown), region refresher, metrics."""

from __future__ import annotations

import logging
import threading

import pytest

from chalicelib.db.connection import Database
from chalicelib.worker.background import background_loops, report_metrics
from tests.support.seed.worker import http_spec, seed
from tests.support.served import HttpTarget
from tests.support.waiting import wait_for
from tests.support.worker_runs import settings, settle


def test_metrics_report_counts_claims_and_outcomes(
    database: Database, make_worker, http_target: HttpTarget, caplog: pytest.LogCaptureFixture
) -> None:
    ok = seed(database, spec=http_spec(http_target.url("/ok")), count=3)
    worker = make_worker()
    settle(worker, database, ok.execution_ids)
    with caplog.at_level(logging.INFO, logger="chalicelib.worker"):
        report_metrics(worker)
    [record] = [r for r in caplog.records if getattr(r, "event", "") == "worker_metrics"]
    counts = {k: getattr(record, k) for k in ("claimed", "succeeded", "retrying", "failed")}
    assert counts == {"claimed": 3, "succeeded": 3, "retrying": 0, "failed": 0}
    assert record.in_flight == 0  # type: ignore[attr-defined]
    assert record.serialization_retries >= 0  # type: ignore[attr-defined]


def test_metrics_report_of_an_idle_worker_is_debug_only(
    database: Database, make_worker, caplog: pytest.LogCaptureFixture
) -> None:
    worker = make_worker()
    last: dict[str, object] = {}
    with caplog.at_level(logging.DEBUG, logger="chalicelib.worker"):
        report_metrics(worker, last)
        report_metrics(worker, last)
    levels = [r.levelno for r in caplog.records if getattr(r, "event", "") == "worker_metrics"]
    assert levels == [logging.INFO, logging.DEBUG]


def test_heartbeat_is_alive_while_running_and_dead_after(database: Database, make_worker) -> None:
    worker = make_worker()
    group = background_loops(worker, settings(), database, metrics_interval_sec=0.05)
    stop = threading.Event()
    thread = threading.Thread(target=group.run, args=(stop,))
    thread.start()
    try:
        rows = wait_for(
            lambda: database.run(
                "SELECT status, metadata FROM region_heartbeats WHERE component LIKE 'worker@%'"
            ),
            "the worker's heartbeat row",
            timeout=10,
        )
        assert rows[0]["status"] == "ALIVE"
        assert rows[0]["metadata"]["worker_id"] == worker.worker_id
        # The worker's loops, its claim and finalize among them, as /health reads them.
        assert {"claim", "heartbeat"} <= set(rows[0]["metadata"]["loop_states"])
    finally:
        stop.set()
        thread.join(timeout=10)
    assert set(group.stats) == {"heartbeat", "region_refresher", "worker_metrics"}
    [row] = database.run("SELECT status FROM region_heartbeats WHERE component LIKE 'worker@%'")
    assert row["status"] == "DEAD"
