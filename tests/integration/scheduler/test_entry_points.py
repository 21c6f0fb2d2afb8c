"""The scheduler's entry points against real PostgreSQL: the Scheduler in a thread (as the
local stack runs it), ``python -m chalicelib.scheduler`` as a process stopped by SIGTERM,
and the scheduled Lambda functions through ``chalice.test.Client``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from chalice.local import LambdaContext
from chalice.test import Client

from chalicelib.db.connection import Database
from chalicelib.runtime.loop import LoopStats
from chalicelib.scheduler.loops import LOOP_NAMES
from chalicelib.scheduler.materializer import CronMaterializer
from chalicelib.scheduler.promoter import DelayedPromoter
from chalicelib.settings import Settings
from chalicelib.wiring.scheduler import build_scheduler
from tests.support.clock import FakeClock
from tests.support.seed.scheduler import (
    T0,
    execution,
    executions_of,
    seed_cron_job,
    seed_endpoint,
    seed_execution,
    seed_one_shot_job,
)
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[3]
FAST = {
    "TE_CRON_TICK_INTERVAL_SEC": "0.1",
    "TE_PROMOTE_INTERVAL_MS": "100",
    "TE_RECLAIM_INTERVAL_SEC": "1",
}


def seed_work(db: Database, now: datetime) -> tuple[str, str, str]:
    """A cron job with three due ticks, a due DELAYED execution and a stuck RUNNING one."""
    seed_endpoint(db)
    minute = now.replace(second=0, microsecond=0)
    cron_job = seed_cron_job(db, next_run_at=minute - timedelta(minutes=2))
    one_shot = seed_one_shot_job(db)
    pending = seed_execution(db, job_id=one_shot, status="PENDING", run_at=now)
    stuck = seed_execution(
        db,
        job_id=one_shot,
        status="RUNNING",
        run_at=now - timedelta(hours=1),
        started_at=now - timedelta(hours=1),
        attempt_count=1,
        worker_id="worker-gone",
    )
    return cron_job, pending, stuck


def work_done(db: Database, cron_job: str, pending: str, stuck: str) -> bool:
    return (
        len(executions_of(db, cron_job)) >= 3
        and execution(db, pending)["status"] == "QUEUED"
        and execution(db, stuck)["status"] == "RETRYING"
    )


def heartbeat(db: Database, component: str) -> dict[str, Any] | None:
    rows = db.run("SELECT * FROM region_heartbeats WHERE component = :c", c=component)
    return rows[0] if rows else None


def test_scheduler_runs_every_loop_in_threads_until_stopped(database: Database) -> None:
    now = T0 + timedelta(seconds=30)
    ids = seed_work(database, now)
    settings = Settings(
        cron_tick_interval_sec=0.05, promote_interval_ms=50, stuck_execution_timeout_sec=300
    )
    scheduler = build_scheduler(
        settings, database, clock=FakeClock(now), component="scheduler@test"
    )
    stop = threading.Event()
    result: list[dict[str, LoopStats]] = []
    thread = threading.Thread(target=lambda: result.append(scheduler.run(stop)))
    thread.start()
    wait_for(lambda: work_done(database, *ids), "all three loops to act", timeout=30)
    wait_for(lambda: heartbeat(database, "scheduler@test"), "a heartbeat", timeout=30)
    stop.set()
    thread.join()
    [stats] = result
    assert set(stats) == {*LOOP_NAMES, "heartbeat", "region_refresher"}
    assert stats["cron_materializer"].total == 3
    assert stats["delayed_promoter"].total == 1
    assert stats["stuck_reclaimer"].total == 1
    row = heartbeat(database, "scheduler@test")
    assert row is not None
    assert row["status"] == "DEAD"
    assert row["metadata"]["loops"] == list(LOOP_NAMES)
    # The last beat reports every loop stopped (each one's state: chalicelib/domain/loops.py).
    states = row["metadata"]["loop_states"]
    assert set(states) == {*LOOP_NAMES, "heartbeat", "region_refresher"}
    assert {s["phase"] for s in states.values()} == {"stopped"}


def test_python_m_scheduler_runs_all_loops_and_stops_on_sigterm(
    database: Database, db_url: str
) -> None:
    ids = seed_work(database, datetime.now(UTC))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TE_")}
    env.update(FAST, TE_DATABASE_URL=db_url, TE_LOG_FORMAT="json")
    process = subprocess.Popen(
        [sys.executable, "-m", "chalicelib.scheduler"],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: work_done(database, *ids), "the process to do the seeded work", timeout=30)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, stderr
    events = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    names = {e.get("event") for e in events}
    assert {"cron_ticks_materialized", "delayed_promoted", "reclaimed", "loop_lag"} <= names
    [stopped] = [e for e in events if e.get("event") == "scheduler_stopped"]
    assert stopped["serialization_retries"] >= 0 and stopped["reconnects"] >= 0
    [row] = database.run("SELECT * FROM region_heartbeats WHERE component LIKE 'scheduler@%'")
    assert row["status"] == "DEAD"


FUNCTIONS = {
    "materialize_cron_ticks": "cron_materializer",
    "promote_delayed_executions": "delayed_promoter",
    "reclaim_stuck_executions": "stuck_reclaimer",
}


@pytest.fixture
def chalice_client(chalice_app: Any, lambda_root: Any) -> Any:
    with Client(chalice_app) as client:
        yield client


def scheduled_event(client: Any) -> dict[str, Any]:
    return dict(
        client.events.generate_cw_event(
            source="aws.events",
            detail_type="Scheduled Event",
            detail={},
            resources=["arn:aws:events:us-west-2:123456789012:rule/task-executor"],
        )
    )


def test_scheduled_functions_run_their_loop_through_the_test_client(
    database: Database, chalice_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in FAST.items():
        monkeypatch.setenv(name, value)
    ids = seed_work(database, datetime.now(UTC))
    event = scheduled_event(chalice_client)
    payloads = {}
    for function, loop in FUNCTIONS.items():
        # chalice.test gives each invocation a context with 3 s remaining.
        payloads[loop] = chalice_client.lambda_.invoke(function, event).payload
        assert payloads[loop]["loop"] == loop
        assert payloads[loop]["iterations"] >= 1
        assert payloads[loop]["failures"] == 0
    assert work_done(database, *ids)
    assert payloads["cron_materializer"]["count"] >= 3
    assert payloads["delayed_promoter"]["count"] == 1
    assert payloads["stuck_reclaimer"]["count"] == 1
    beats = database.run("SELECT component, status FROM region_heartbeats ORDER BY component")
    assert [(b["component"], b["status"]) for b in beats] == [
        (f"scheduler/{loop}", "ALIVE") for loop in sorted(FUNCTIONS.values())
    ]


@pytest.mark.parametrize("runtime_ms", [1200, 300])
def test_scheduled_function_returns_before_the_deadline(
    database: Database, chalice_client: Any, runtime_ms: int
) -> None:
    import app as app_module

    context = LambdaContext("promote_delayed_executions", 128, max_runtime_ms=runtime_ms)
    handler = app_module.app.handler_map["promote_delayed_executions"]
    payload = handler(scheduled_event(chalice_client), context)
    assert context.get_remaining_time_in_millis() > 0
    # With less time than the margin the function returns without starting an iteration.
    assert (payload["iterations"] > 0) == (runtime_ms > 1000)


def test_functions_are_scheduled_every_minute() -> None:
    import app as app_module

    schedules = {
        source.name: source.schedule_expression
        for source in app_module.app.event_sources
        if hasattr(source, "schedule_expression")
    }
    assert {name: schedules.get(name) for name in FUNCTIONS} == dict.fromkeys(
        FUNCTIONS, "rate(1 minute)"
    )


def test_jobs_created_through_the_api_fire_on_time(api: Any, database: Database) -> None:
    endpoint = {
        "name": "ep-api",
        "type": "HTTP",
        "spec": {"url": "http://127.0.0.1:9/hook", "method": "POST"},
        "retry_policy": {"max_attempts": 4},
    }
    assert api.post("/endpoints", endpoint).status == 201
    now = datetime.now(UTC)
    cron = api.post(
        "/jobs",
        {"endpoint": "ep-api", "trigger": "CRON", "cron": "* * * * *", "timezone": "UTC"},
    )
    assert cron.status == 201, cron.body
    run_at = now + timedelta(minutes=5)
    delayed = api.post(
        "/jobs",
        {
            "endpoint": "ep-api",
            "trigger": "DELAYED",
            "idempotency_key": "later",
            "run_at": run_at.isoformat(),
        },
    )
    assert delayed.status == 201, delayed.body
    # The scheduler was "down" for three minutes past the first tick: it catches up.
    first = datetime.fromisoformat(cron.body["next_run_at"])
    clock = FakeClock(first + timedelta(minutes=2, seconds=30))
    CronMaterializer(database, clock=clock).run_once()
    ticks = executions_of(database, cron.body["job_id"])
    assert [e["run_at"] for e in ticks] == [first + timedelta(minutes=i) for i in range(3)]
    assert {(e["status"], e["max_attempts"]) for e in ticks} == {("QUEUED", 4)}
    promoter = DelayedPromoter(database, clock=FakeClock(run_at - timedelta(milliseconds=1)))
    assert promoter.run_once().count == 0
    assert DelayedPromoter(database, clock=FakeClock(run_at)).run_once().count == 1
    status = api.get(f"/executions/{delayed.body['execution']['execution_id']}").body["status"]
    assert status == "QUEUED"
