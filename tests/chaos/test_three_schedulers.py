"""Fault 4: three schedulers at once catching up 10 minutes of missed cron ticks.

500 cron jobs (``* * * * *``; ``TE_CHAOS_N`` below 500 means fewer) whose
``cron_next_run_at`` is 10 whole minutes in the past are seeded with SQL on a dedicated
server; three ``python -m chalicelib.scheduler`` processes run until no job is due. No worker
runs: only materialization matters. Then, for every job, the materialized ticks are exactly
the ticks of its schedule (``chalicelib.domain.cron.next_tick``) from its original
``cron_next_run_at`` up to its final one: one execution per (job, tick), none skipped, and
the final one is after the moment the catch-up was observed complete. The 40001 retries the
contention caused are counted from the server (its log and ``xact_rollback``).
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest

from chalicelib.db.connection import Database
from tests.chaos.cron_check import (
    MISSED_MINUTES,
    check_jobs,
    due_jobs,
    expected_ticks,
    seed_cron_jobs,
)
from tests.chaos.figures import chaos_n, write_figures
from tests.chaos.harness import Stack, figures, logged_totals
from tests.chaos.pg_restart import RestartablePostgres
from tests.support.seed.worker import http_spec

pytestmark = pytest.mark.chaos

SCHEDULERS = 3
JOBS = min(500, chaos_n(500))


@pytest.fixture
def db_url(dedicated_pg: RestartablePostgres) -> str:
    return dedicated_pg.url()


def test_three_schedulers_materialize_each_tick_once(
    database: Database, db_url: str, dedicated_pg: RestartablePostgres, tmp_path: Path
) -> None:
    first = seed_cron_jobs(database, JOBS, http_spec("http://127.0.0.1:9/never-called"))
    rollbacks_before = dedicated_pg.xact_rollbacks()
    serialize_before = dedicated_pg.server_log_count("could not serialize access")
    stack = Stack(db_url, tmp_path, {"TE_LOG_LEVEL": "INFO"})
    started = time.monotonic()
    for n in range(SCHEDULERS):
        stack.start(f"scheduler-{n}", "chalicelib.scheduler")
    try:
        deadline = started + 600
        while True:
            due, at = due_jobs(database)
            if due == 0:
                caught_up_at, caught_up_s = at, time.monotonic() - started
                break
            assert time.monotonic() < deadline, f"{due} jobs still due"
            exited = {r: p.returncode for r, p in stack.procs.items() if p.poll() is not None}
            assert exited == {}, f"schedulers exited: {exited}"
            time.sleep(0.2)
    finally:
        stack.close()
    duration = time.monotonic() - started

    result = check_jobs(database, first, caught_up_at)
    created = int(database.run("SELECT count(*) AS n FROM executions")[0]["n"])
    expected = JOBS * len(expected_ticks(first, caught_up_at + timedelta(microseconds=1)))
    retries = dedicated_pg.server_log_count("could not serialize access") - serialize_before
    write_figures(
        "three_schedulers",
        figures(
            created=created,
            delivered=created,  # materialized: no worker runs in this test
            duplicated=result.duplicated,
            lost=result.skipped,
            stuck=result.not_caught_up,
            duration_s=duration,
            jobs=JOBS,
            schedulers=SCHEDULERS,
            expected_ticks_at_catch_up=expected,
            unexpected_ticks=result.unexpected,
            ticks_per_job=result.ticks_per_job,
            caught_up_s=round(caught_up_s, 1),
            serialization_failures_40001=retries,
            xact_rollback_delta=dedicated_pg.xact_rollbacks() - rollbacks_before,
            materialized_by=logged_totals(
                tmp_path, "scheduler-*.log", "cron_ticks_materialized", "count"
            ),
        ),
    )

    assert result.duplicated == 0 and result.skipped == 0, result
    assert result.unexpected == 0 and result.not_caught_up == 0, result
    assert created >= expected
    assert min(result.ticks_per_job) >= MISSED_MINUTES + 1, result
