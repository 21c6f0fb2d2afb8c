"""The housekeeper's ``queue_health`` line (what the AWS alarms on lag and failure rate
read), against the real database: attempts recorded by the worker's own finalize statement,
due executions of a paused and an unpaused endpoint, the line as the JSON formatter writes
it."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta

import pytest

from chalicelib.db.connection import Database
from chalicelib.health.heartbeat import SCHEDULER, WORKER, HeartbeatWriter
from chalicelib.logs import JsonFormatter
from chalicelib.scheduler.housekeeper import Housekeeper
from chalicelib.scheduler.queue_health import EVENT, QueueHealth
from chalicelib.services.metrics import MetricsService
from tests.support.clock import FakeClock
from tests.support.seed import jobs as f
from tests.support.seed.scheduler import seed_endpoint, seed_execution, seed_one_shot_job

MINUTE = timedelta(minutes=1)


def deliver(db: Database, endpoint: str, key: str, outcomes: list[tuple[str, str | None]]) -> None:
    """One execution delivered as a worker records it; each attempt under its own writer,
    so each is a summary row of its own (the test moves rows between minutes)."""
    job_id = seed_one_shot_job(db, endpoint=endpoint, key=key)
    execution_id = seed_execution(
        db,
        job_id=job_id,
        endpoint=endpoint,
        status="QUEUED",
        run_at=datetime.now(UTC),
        max_attempts=len(outcomes),
    )
    for n, (status, error_type) in enumerate(outcomes):
        f.record_attempts(db, execution_id, [(status, 20, error_type)], worker_id=f"w-{key}-{n}")


def lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, object]]:
    """The queue_health lines as JSON objects, as CloudWatch receives them."""
    formatter = JsonFormatter()
    found = [r for r in caplog.records if getattr(r, "event", None) == EVENT]
    return [json.loads(formatter.format(r)) for r in found]


def test_the_housekeeper_logs_queue_health_once_a_minute_with_the_deployments_figures(
    database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    counted = datetime.now(UTC).replace(second=0, microsecond=0) - 10 * MINUTE
    clock = FakeClock(counted + MINUTE + timedelta(seconds=20))
    for name in ("a", "b", "paused"):
        seed_endpoint(database, name)
    # The minute counted: 5 attempts, 2 of them failed (one retried, one the last).
    deliver(database, "a", "a1", [("SUCCESS", None)])
    deliver(database, "a", "a2", [("SUCCESS", None)])
    deliver(database, "b", "b1", [("RETRYING", "HTTP_ERROR"), ("FAILED", "TIMEOUT")])
    deliver(database, "b", "b2", [("SUCCESS", None)])
    database.execute("UPDATE delivery_counts SET bucket_start = :m", m=counted)
    # The minutes around it are not counted: one before, and the real current one after.
    deliver(database, "a", "before", [("FAILED", "CONNECTION_ERROR")])
    database.execute(
        "UPDATE delivery_counts SET bucket_start = :m WHERE writer LIKE 'w-before-%'",
        m=counted - MINUTE,
    )
    deliver(database, "b", "after", [("FAILED", "CONNECTION_ERROR")])
    # Due work: 90 s late on 'a'; 10 minutes on the paused endpoint (not lag); 'b' not due.
    now = clock()
    for endpoint, run_at in (("a", now - timedelta(seconds=90)), ("b", now + MINUTE)):
        seed_execution(
            database,
            job_id=seed_one_shot_job(database, endpoint=endpoint, key=f"due-{endpoint}"),
            endpoint=endpoint,
            status="QUEUED",
            run_at=run_at,
        )
    seed_execution(
        database,
        job_id=seed_one_shot_job(database, endpoint="paused", key="due-paused"),
        endpoint="paused",
        status="RETRYING",
        run_at=now - 10 * MINUTE,
    )
    database.execute("UPDATE endpoints SET paused_at = now() WHERE name = 'paused'")

    keeper = Housekeeper(database, retention_days=0, clock=clock)
    with caplog.at_level(logging.INFO, logger="chalicelib.scheduler.queue_health"):
        keeper.run_once()
        clock.set(now + timedelta(seconds=30))  # the same minute: not logged again
        keeper.run_once()
        [line] = lines(caplog)
        assert line["event"] == EVENT
        assert {k: line[k] for k in QueueHealth.__dataclass_fields__} == {
            "minute": counted.isoformat(),
            "oldest_due_lag_seconds": 90.0,
            "attempts": 5,
            "failed_attempts": 2,
            "live_workers": 0,  # no process beats in this test
            "live_schedulers": 0,
        }
        # The same lag GET /metrics shows at that instant (te_oldest_due_lag_seconds).
        assert MetricsService(database, lambda: now).snapshot().oldest_due_lag_sec == 90.0

        clock.set(now + MINUTE)  # the next minute: its own line, nothing counted in it
        keeper.run_once()
        assert lines(caplog)[1:] == [
            {
                **lines(caplog)[1],
                "minute": (counted + MINUTE).isoformat(),
                "oldest_due_lag_seconds": 150.0,
                "attempts": 0,
                "failed_attempts": 0,
                "live_workers": 0,
                "live_schedulers": 0,
            }
        ]


def test_nothing_due_and_nothing_delivered_is_zero_lag_and_no_attempts(
    database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    seed_endpoint(database, "a")
    with caplog.at_level(logging.INFO, logger="chalicelib.scheduler.queue_health"):
        Housekeeper(database, retention_days=0).run_once()
    [line] = lines(caplog)
    assert (line["oldest_due_lag_seconds"], line["attempts"], line["failed_attempts"]) == (0, 0, 0)


def test_the_line_counts_the_live_workers_and_schedulers_as_metrics_does(
    database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    """Two workers beat now, a third beat 16 s ago (killed: stale), one scheduler beats:
    the line says 2 and 1, what te_live_processes shows at the same instant."""
    now = datetime.now(UTC)

    def beat(kind: str, component: str, at: datetime) -> None:
        HeartbeatWriter(database, kind=kind, component=component, clock=lambda: at).beat()

    beat(WORKER, "worker@h:1", now)
    beat(WORKER, "worker@h:2", now)
    beat(WORKER, "worker@h:3", now - timedelta(seconds=16))
    beat(SCHEDULER, "scheduler@h:4", now)
    with caplog.at_level(logging.INFO, logger="chalicelib.scheduler.queue_health"):
        Housekeeper(database, retention_days=0, clock=lambda: now).run_once()
    [line] = lines(caplog)
    assert (line["live_workers"], line["live_schedulers"]) == (2, 1)
    live = {k.kind: k.live for k in MetricsService(database, lambda: now).snapshot().kinds}
    assert (live["worker"], live["scheduler"]) == (2, 1)
