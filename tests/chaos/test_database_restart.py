"""Fault 2: the PostgreSQL server stopped and started mid-run.

``TE_CHAOS_N`` (default 10,000) IMMEDIATE executions go to a local HTTP target through
``python -m chalicelib.worker`` and ``python -m chalicelib.scheduler`` on a dedicated
embedded server (the session's server is shared, so this test restarts its own). After a
warm-up the baseline throughput is measured, then ``pg_ctl -m fast stop``, a few seconds
down, ``pg_ctl start``. Nothing is restarted by the test except the database:

* the worker and scheduler reconnect by themselves (neither exits) and every execution
  ends SUCCESS and reached the target: 0 lost, 0 stuck; duplicates are counted
  (at-least-once: a delivery whose finalize died with the database is redelivered);
* the API (in-process Chalice app) answers again after the restart, reads and writes;
* throughput after the restart, in 1-s buckets, against the baseline: the figure
  ``recovered_s`` is when a bucket first reaches 95 % of it.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from chalicelib.db.connection import Database, Transaction
from chalicelib.errors import DatabaseError
from tests.chaos.figures import chaos_n, write_figures
from tests.chaos.harness import (
    Stack,
    account_deliveries,
    status_counts,
)
from tests.chaos.pg_restart import RestartablePostgres
from tests.chaos.throughput import Throughput, seconds_to_recover
from tests.support.api_client import ApiClient
from tests.support.seed.worker import Seeded, http_spec, retry_policy, seed
from tests.support.served import HttpTarget

pytestmark = pytest.mark.chaos

EXECUTION_HEADER = "x-task-executor-execution-id"
WARMUP_S = 2.0
BASELINE_S = 5.0
DOWN_S = 3.0
SAMPLE_S = 0.2
STOP_SHARE = 0.4
# Read at import: the ``app_env`` fixture clears every TE_* variable before the test runs.
TOTAL = chaos_n(10_000)


@pytest.fixture
def db_url(dedicated_pg: RestartablePostgres) -> str:
    """Overrides the session fixture: ``database``, ``app_env`` and ``api`` use this server."""
    return dedicated_pg.url()


def finished(db: Database) -> int:
    """Executions in a terminal status, read at READ COMMITTED so the probe takes no
    SERIALIZABLE predicate locks (it must not cause the 40001s it would then observe)."""

    def work(tx: Transaction) -> int:
        tx.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
        return int(
            tx.scalar("SELECT count(*) FROM executions WHERE status IN ('SUCCESS', 'FAILED')")
        )

    return db.transaction(work, name="chaos_finished")


@dataclass
class Observed:
    """What the run saw: throughput samples and the API's answers by phase."""

    throughput: Throughput = field(default_factory=Throughput)
    api: Counter[str] = field(default_factory=Counter)
    api_recovered_s: float | None = None
    job_created_after_restart: str | None = None

    def sample(self, db: Database) -> None:
        with contextlib.suppress(DatabaseError):  # our pool reconnects on the next sample
            self.throughput.add(time.monotonic(), finished(db))


def probe_api(api: ApiClient, seeded: Seeded, seen: Observed, phase: str) -> int:
    reply = api.get(f"/executions/{seeded.execution_id}")
    seen.api[f"{phase}:{reply.status}:{reply.error_code or 'ok'}"] += 1
    return reply.status


def create_job_through_api(api: ApiClient, seeded: Seeded) -> str | None:
    """One more IMMEDIATE job, through the API: its writes work again too."""
    body = {
        "endpoint": seeded.endpoint,
        "trigger": "IMMEDIATE",
        "idempotency_key": "after-restart",
        "input": {"user_id": "api"},
    }
    reply = api.post("/jobs", body)
    if reply.status == 503:
        return None  # still reconnecting: ask again
    assert reply.status == 201, reply
    return str(reply.body["execution"]["execution_id"])


def assert_alive(stack: Stack) -> None:
    exited = {r: p.returncode for r, p in stack.procs.items() if p.poll() is not None}
    assert exited == {}, f"service processes exited: {exited}"


def run_baseline(db: Database, seen: Observed, stack: Stack, started: float, total: int) -> None:
    """Until the baseline window is over, or 40 % of the run is done (a small TE_CHAOS_N
    must leave work for after the restart)."""
    while time.monotonic() < started + WARMUP_S + BASELINE_S:
        seen.sample(db)
        assert_alive(stack)
        done = seen.throughput.counts[-1] if seen.throughput.counts else 0
        if done >= STOP_SHARE * total and time.monotonic() > started + WARMUP_S + 1:
            return
        time.sleep(SAMPLE_S)


def after_restart(
    db: Database, api: ApiClient, seeded: Seeded, seen: Observed, stack: Stack, ready: float
) -> None:
    """Sample and probe the API until every execution (the API's one too) is terminal."""
    deadline = time.monotonic() + max(600.0, len(seeded.execution_ids) / 5)
    while True:
        assert time.monotonic() < deadline, (status_counts(db), seen.api)
        seen.sample(db)
        assert_alive(stack)
        if seen.job_created_after_restart is None:
            if probe_api(api, seeded, seen, "after") == 200:
                seen.api_recovered_s = seen.api_recovered_s or time.monotonic() - ready
                seen.job_created_after_restart = create_job_through_api(api, seeded)
        elif seen.throughput.counts and seen.throughput.counts[-1] > len(seeded.execution_ids):
            return
        time.sleep(SAMPLE_S)


def test_database_restart_loses_nothing(
    database: Database,
    db_url: str,
    dedicated_pg: RestartablePostgres,
    api: ApiClient,
    http_target: HttpTarget,
    tmp_path: Path,
) -> None:
    total = TOTAL
    seeded = seed(
        database,
        spec=http_spec(http_target.url("/hook")),
        policy=retry_policy(max_attempts=20),
        inputs=[{"user_id": f"u{i}"} for i in range(total)],
    )
    seen = Observed()
    assert probe_api(api, seeded, seen, "before") == 200
    stack = Stack(db_url, tmp_path)
    started = time.monotonic()
    stack.start("scheduler", "chalicelib.scheduler")
    stack.start("worker", "chalicelib.worker")
    try:
        run_baseline(database, seen, stack, started, total)
        stop_at = time.monotonic()
        baseline = seen.throughput.rate(started + WARMUP_S, stop_at)
        assert seen.throughput.counts[-1] < total, "TE_CHAOS_N too small: done before the stop"
        stop_s = dedicated_pg.stop()
        down_until = time.monotonic() + DOWN_S
        while time.monotonic() < down_until:
            probe_api(api, seeded, seen, "down")
            assert_alive(stack)
            time.sleep(SAMPLE_S)
        start_s = dedicated_pg.start()
        ready = time.monotonic()
        after_restart(database, api, seeded, seen, stack, ready)
    finally:
        stack.close()
    duration = time.monotonic() - started

    ids = set(seeded.execution_ids)
    if seen.job_created_after_restart:
        ids.add(seen.job_created_after_restart)
    received = Counter(r.headers.get(EXECUTION_HEADER) for r in http_target.received("/hook"))
    counts = status_counts(database)
    buckets = seen.throughput.buckets(ready, len(ids))
    recovered_s = seconds_to_recover(buckets, baseline)
    account = account_deliveries(database, ids, received, counts)
    write_figures(
        "database_restart",
        account.figures(
            duration,
            baseline_per_s=round(baseline, 1),
            down_s=round(ready - stop_at, 1),
            pg_ctl_stop_s=round(stop_s, 2),
            pg_ctl_start_s=round(start_s, 2),
            after_restart_per_s=buckets[:15],
            recovered_s=recovered_s,
            api_recovered_s=seen.api_recovered_s and round(seen.api_recovered_s, 2),
            api_replies=dict(sorted(seen.api.items())),
            statuses=counts,
        ),
    )

    assert (account.lost, account.stuck) == (0, 0), counts
    assert account.beyond_attempts == 0, "a delivery was repeated without an attempt"
    assert seen.job_created_after_restart is not None, seen.api
    assert seen.api["before:200:ok"] == 1 and seen.api_recovered_s is not None
    assert not any(k.startswith("down:200") for k in seen.api), seen.api
    assert recovered_s is not None, (baseline, buckets)
