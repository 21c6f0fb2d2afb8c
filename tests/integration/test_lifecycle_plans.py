"""The lifecycle reads and purges follow their indexes: a delete's live-job check costs what
is live and the retention purge what it deletes, never the size of history. Plans are read
as data (EXPLAIN (FORMAT JSON)) with sequential scans disabled, since on tiny test tables
the planner would rightly prefer them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from chalicelib.db.connection import Database, Transaction
from chalicelib.db.queries import queries


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


def indexes_used(database: Database, query: str, **params: Any) -> set[str]:
    def explain(tx: Transaction) -> Any:
        tx.run("SET LOCAL enable_seqscan = off")
        return tx.run("EXPLAIN (FORMAT JSON) " + queries[query].sql, **params)[0]

    row = database.transaction(explain)
    document = next(iter(row.values()))
    plan = (json.loads(document) if isinstance(document, str) else document)[0]["Plan"]
    return {n["Index Name"] for n in nodes(plan) if "Index Name" in n}


LIVE = {"idx_jobs_cron_due", "idx_executions_pending"}
#: Any partial index of due executions serves it (all cover only QUEUED/RETRYING rows).
DUE = {"idx_executions_pickup", "idx_executions_due", "idx_executions_due_by_endpoint"}


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("catalogue_endpoint_live_jobs", {"name": "e", "limit": 11}),
        ("catalogue_config_live_jobs", {"name": "c", "limit": 11}),
        ("catalogue_payload_spec_live_jobs", {"name": "p", "limit": 11}),
        ("catalogue_secret_live_jobs", {"pattern": "x", "name": "x", "limit": 11}),
    ],
)
def test_the_live_job_check_reads_the_partial_indexes_of_live_work(
    database: Database, name: str, params: dict[str, Any]
) -> None:
    used = indexes_used(database, name, **params)
    assert used >= LIVE | {"idx_executions_running"}, used
    assert used & DUE, used
    # Executions waiting behind their ordering key's head are live work outside DUE.
    assert "idx_executions_ordering" in used, used


def test_purges_walk_their_indexes(database: Database) -> None:
    cutoff = datetime(2026, 1, 1, tzinfo=UTC)
    one_shot = indexes_used(database, "housekeeping_purge_one_shot", cutoff=cutoff, batch=500)
    assert {"idx_jobs_created", "idx_executions_by_job"} <= one_shot, one_shot
    cron = indexes_used(database, "housekeeping_purge_cron", cutoff=cutoff, batch=500)
    assert "idx_jobs_cron" in cron, cron
    # Each cron job's old executions on idx_executions_by_job, or the old ended executions
    # on idx_executions_ended (migration 007, partial on the terminal statuses the purge
    # deletes) or on idx_executions_by_endpoint's (endpoint, terminal status, created_at <
    # cutoff) ranges (migration 020; PostgreSQL 18 skips over its leading endpoint), probed
    # against the cron jobs: either way the rows read are ended ones before the cutoff,
    # never live work.
    assert cron & {"idx_executions_by_job", "idx_executions_ended", "idx_executions_by_endpoint"}


def test_the_one_shot_purge_probes_per_job_whatever_the_planner_estimates(
    database: Database,
) -> None:
    """On real statistics that overstate the expired jobs (counted before most of them were
    purged, as after a backlog drains and before the next ANALYZE), each plan of the purge
    reads its page's jobs and their executions: the scale bench at 10^5 found the join of
    jobs to executions hashed against a sequential scan of every execution per pass."""
    from tests.support.plans import bounded
    from tests.support.seed.worker import http_spec, seed

    seeded = seed(database, spec=http_spec("http://127.0.0.1:9/"), count=1)
    fresh, expired, left, batch = 200_000, 10_000, 300, 100
    database.run(
        "INSERT INTO jobs (job_id, endpoint, endpoint_type, trigger_type, created_at)"
        " SELECT 'job_h' || g, :endpoint, 'HTTP', 'IMMEDIATE',"
        " CASE WHEN g <= :expired THEN now() - INTERVAL '400 days' ELSE now() END"
        " FROM generate_series(1, :total) AS g",
        endpoint=seeded.endpoint,
        expired=expired,
        total=fresh + expired,
    )
    database.run(
        "INSERT INTO executions (job_id, endpoint, endpoint_type, status, run_at, created_at,"
        " completed_at)"
        " SELECT j.job_id, :endpoint, 'HTTP', 'SUCCESS', j.created_at, j.created_at,"
        " j.created_at FROM jobs AS j WHERE j.job_id LIKE 'job_h%'",
        endpoint=seeded.endpoint,
    )
    database.run("ANALYZE")
    for table in ("executions", "jobs"):  # most of the expired ones go, unseen by ANALYZE
        database.run(
            f"DELETE FROM {table} WHERE job_id IN (SELECT 'job_h' || g"
            " FROM generate_series(:left + 1, :expired) AS g)",
            left=left,
            expired=expired,
        )
    cutoff = datetime.now(UTC).replace(year=datetime.now(UTC).year - 1)
    bounded(
        database,
        queries["housekeeping_purge_one_shot"],
        {"cutoff": cutoff, "batch": batch},
        at_most=5 * left,
        tables=("executions", "jobs"),
    )
    remaining = database.run(
        "SELECT count(*) AS n FROM jobs WHERE job_id LIKE 'job_h%' AND created_at < :cutoff",
        cutoff=cutoff,
    )[0]["n"]
    assert remaining == left - 2 * batch  # a page per plan


def test_the_cron_purge_reads_its_page_oldest_first_whatever_the_plan(
    database: Database,
) -> None:
    """A cron job's ticks, the few expired ones written last (at the table's end): each plan
    of the purge takes its page, oldest first, on the job's range of idx_executions_by_job.
    With a bare LIMIT, the generic plan (made without the cutoff) scanned the table until it
    had a page: here, every fresh tick first."""
    from tests.support.plans import bounded
    from tests.support.seed.scheduler import T0, seed_cron_job, seed_endpoint

    seed_endpoint(database)
    job_id = seed_cron_job(database, next_run_at=T0)
    fresh, expired, batch = 20_000, 1_000, 100
    for first, last, age in ((1, fresh, "0 days"), (fresh + 1, fresh + expired, "400 days")):
        database.run(
            "INSERT INTO executions (job_id, endpoint, endpoint_type, status, run_at,"
            " created_at, completed_at, idempotency_key)"
            " SELECT :job, 'ep-test', 'HTTP', 'SUCCESS', t, t, t, 'tick:' || g FROM ("
            "   SELECT g, now() - CAST(:age AS INTERVAL) - g * INTERVAL '1 second' AS t"
            "   FROM generate_series(CAST(:first AS INT), CAST(:last AS INT)) AS g) AS s",
            job=job_id,
            age=age,
            first=first,
            last=last,
        )
    database.run("ANALYZE")
    cutoff = datetime.now(UTC).replace(year=datetime.now(UTC).year - 1)
    bounded(  # a plan made for 1,000 expired rows may sort them all: never the history
        database,
        queries["housekeeping_purge_cron"],
        {"cutoff": cutoff, "batch": batch},
        at_most=expired + 2 * batch,
        tables=("executions",),
    )
    left = database.run(
        "SELECT count(*) AS n, max(idempotency_key) AS last FROM executions"
        " WHERE created_at < :cutoff",
        cutoff=cutoff,
    )[0]
    assert left["n"] == expired - 2 * batch  # a page per plan
    # Oldest first: the oldest ticks are the highest g; the newest expired one stays.
    assert left["last"] == f"tick:{fresh + expired - 2 * batch}"
