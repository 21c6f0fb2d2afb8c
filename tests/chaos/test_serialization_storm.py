"""Fault 6: a serialization storm, several workers and schedulers at SERIALIZABLE.

Three ``python -m chalicelib.worker`` and three ``python -m chalicelib.scheduler`` processes
on a dedicated server (``default_transaction_isolation = serializable``, like CockroachDB)
work through a mix of ``TE_CHAOS_N`` (default 10,000) executions: 60 % IMMEDIATE, 30 %
DELAYED (due over the first seconds: the promoters race), and cron jobs (N/100 jobs with
10 missed minutes: the materializers race). The HTTP target fails every other request
(503), so executions also go through RETRYING (``max_attempts=20``, fixed 100 ms, so that
practically all end SUCCESS).

Counted: the 40001 serialization failures the server reported (its log, every one of which
a ``Database.transaction`` retried) and ``pg_stat_database.xact_rollback``. Shown: no lost
update, i.e. every execution terminal exactly once, as many attempt rows as
``attempt_count`` (numbered 1..n), no execution with two SUCCESS attempts, the execution's
status equal to its last attempt's, one execution per cron tick, and every SUCCESS
delivered (deliveries beyond the recorded attempts are counted as duplicates).
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from chalicelib.db.connection import Database
from tests.chaos.cron_check import check_jobs, due_jobs, seed_cron_jobs
from tests.chaos.figures import chaos_n, write_figures
from tests.chaos.harness import TERMINAL, Stack, figures, status_counts
from tests.chaos.pg_restart import RestartablePostgres
from tests.support.seed.worker import http_spec, retry_policy, seed
from tests.support.served import HttpTarget, Reply

pytestmark = pytest.mark.chaos

PROCESSES = 3
POLICY = retry_policy(max_attempts=20, backoff="fixed", initial_delay_ms=100)
DELAY_SPREAD_S = 5
CRON_MISSED_MINUTES = 10
EXECUTION_HEADER = "x-task-executor-execution-id"

#: Each is a count of executions breaking the invariant (all must be 0).
INVARIANTS = {
    "attempt_rows_ne_attempt_count": """
        SELECT count(*) AS n FROM executions e
        LEFT JOIN (SELECT execution_id, count(*) AS rows, max(attempt_number) AS top
                   FROM attempts GROUP BY execution_id) a USING (execution_id)
        WHERE COALESCE(a.rows, 0) <> e.attempt_count OR COALESCE(a.top, 0) <> e.attempt_count
    """,
    "two_success_attempts": """
        SELECT count(*) AS n FROM (
            SELECT execution_id FROM attempts WHERE status = 'SUCCESS'
            GROUP BY execution_id HAVING count(*) > 1) t
    """,
    "status_ne_last_attempt": """
        SELECT count(*) AS n FROM executions e
        JOIN attempts a ON a.execution_id = e.execution_id
                       AND a.attempt_number = e.attempt_count
        WHERE e.status IN ('SUCCESS', 'FAILED') AND a.status <> e.status
    """,
    "terminal_without_completed_at": """
        SELECT count(*) AS n FROM executions
        WHERE status IN ('SUCCESS', 'FAILED') AND completed_at IS NULL
    """,
}


@pytest.fixture
def db_url(dedicated_pg: RestartablePostgres) -> str:
    return dedicated_pg.url()


def seed_mix(db: Database, url: str, total: int) -> tuple[dict[str, int], datetime]:
    """IMMEDIATE, DELAYED (PENDING, due within DELAY_SPREAD_S) and cron executions."""
    spec = http_spec(url)
    immediate = total * 6 // 10
    delayed = total * 3 // 10
    seed(db, spec=spec, policy=POLICY, count=immediate)
    later = seed(db, spec=spec, policy=POLICY, count=delayed, status="PENDING")
    db.run("UPDATE jobs SET trigger_type = 'DELAYED' WHERE job_id = :id", id=later.job_id)
    db.run(
        "UPDATE executions SET run_at = now() + random() * make_interval(secs => :spread) "
        "WHERE job_id = :id",
        id=later.job_id,
        spread=DELAY_SPREAD_S,
    )
    cron_jobs = max(1, total // 100)
    first = seed_cron_jobs(db, cron_jobs, spec, policy=POLICY, missed_minutes=CRON_MISSED_MINUTES)
    return {"immediate": immediate, "delayed": delayed, "cron_jobs": cron_jobs}, first


def wait_all_terminal(db: Database, stack: Stack, *, cron_caught_up: bool) -> None:
    deadline = time.monotonic() + 900
    while True:
        counts = status_counts(db)
        due = due_jobs(db)[0] if cron_caught_up else 0
        if due == 0 and not any(s not in TERMINAL for s in counts):
            return
        assert time.monotonic() < deadline, counts
        exited = {r: p.returncode for r, p in stack.procs.items() if p.poll() is not None}
        assert exited == {}, f"service processes exited: {exited}"
        time.sleep(0.3)


def stop_schedulers(stack: Stack) -> None:
    schedulers = Stack(stack.db_url, stack.log_dir)
    for role in [r for r in stack.procs if r.startswith("scheduler")]:
        schedulers.procs[role] = stack.procs.pop(role)
    schedulers.close()


def test_serialization_storm_loses_no_update(
    database: Database,
    db_url: str,
    dedicated_pg: RestartablePostgres,
    http_target: HttpTarget,
    tmp_path: Path,
) -> None:
    total = chaos_n(10_000)
    http_target.script("/flaky", *[Reply(status=503), Reply(status=200)] * (4 * total), Reply())
    mix, first = seed_mix(database, http_target.url("/flaky"), total)
    rollbacks_before = dedicated_pg.xact_rollbacks()
    serialize_before = dedicated_pg.server_log_count("could not serialize access")
    stack = Stack(db_url, tmp_path, {"TE_STUCK_EXECUTION_TIMEOUT_SEC": "120"})
    started = time.monotonic()
    for n in range(PROCESSES):
        stack.start(f"scheduler-{n}", "chalicelib.scheduler")
        stack.start(f"worker-{n}", "chalicelib.worker")
    try:
        wait_all_terminal(database, stack, cron_caught_up=True)
        caught_up_at = due_jobs(database)[1]
        stop_schedulers(stack)
        # Ticks materialized ahead (the look-ahead) become due and are delivered.
        wait_all_terminal(database, stack, cron_caught_up=False)
    finally:
        stack.close()
    duration = time.monotonic() - started

    broken = {name: int(database.run(sql)[0]["n"]) for name, sql in INVARIANTS.items()}
    cron = check_jobs(database, first, caught_up_at - timedelta(seconds=1))
    counts = status_counts(database)
    created = sum(counts.values())
    rows = database.run(
        "SELECT execution_id, status, attempt_count FROM executions ORDER BY execution_id"
    )
    received = Counter(r.headers.get(EXECUTION_HEADER) for r in http_target.received("/flaky"))
    succeeded = {r["execution_id"] for r in rows if r["status"] == "SUCCESS"}
    unrecorded = sum(max(0, received[r["execution_id"]] - r["attempt_count"]) for r in rows)
    write_figures(
        "serialization_storm",
        figures(
            created=created,
            delivered=len(succeeded & set(received)),
            duplicated=unrecorded,
            lost=len(succeeded - set(received)) + sum(broken.values()),
            stuck=sum(n for s, n in counts.items() if s not in TERMINAL),
            duration_s=duration,
            mix=mix,
            workers=PROCESSES,
            schedulers=PROCESSES,
            serialization_failures_40001=dedicated_pg.server_log_count("could not serialize access")
            - serialize_before,
            deadlocks=dedicated_pg.server_log_count("deadlock detected"),
            xact_rollback_delta=dedicated_pg.xact_rollbacks() - rollbacks_before,
            attempts=int(database.run("SELECT count(*) AS n FROM attempts")[0]["n"]),
            invariants_broken=broken,
            cron_ticks={k: v for k, v in cron.figures().items() if k != "not_caught_up"},
            statuses=counts,
        ),
    )

    assert broken == dict.fromkeys(INVARIANTS, 0), broken
    assert (cron.duplicated, cron.skipped, cron.unexpected) == (0, 0, 0), cron
    assert not any(s not in TERMINAL for s in counts), counts
    assert succeeded <= set(received)
