"""Claim strategies: disjoint claims under concurrency, and the claim stays on its index."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from chalicelib.db.connection import Database
from chalicelib.domain.regions import ALL_REGIONS
from chalicelib.worker.claims import ConditionalUpdateClaim, SkipLockedClaim, render
from tests.fixtures.services import HttpTarget
from tests.integration.worker.factories import http_spec, seed, statuses

STRATEGIES = ["skip_locked", "conditional_update"]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_two_workers_never_run_the_same_execution(
    database: Database, make_worker, http_target: HttpTarget, strategy: str
) -> None:
    seeded = seed(database, spec=http_spec(http_target.url("/work")), count=400)
    workers = [
        make_worker(worker_id=f"w{i}", claim_strategy=strategy, worker_max_concurrent=8)
        for i in range(2)
    ]
    done = threading.Event()
    threads = [threading.Thread(target=w.run, args=(done,)) for w in workers]
    for thread in threads:
        thread.start()
    try:
        deadline = threading.Event()
        while statuses(database, seeded.execution_ids).get("SUCCESS", 0) < 400:
            assert not deadline.wait(0.05) and any(t.is_alive() for t in threads)
            if len(http_target.received()) > 400:
                break
    finally:
        done.set()
        for thread in threads:
            thread.join(timeout=10)
        for worker in workers:
            worker.drain(10)

    per_execution = Counter(
        r.headers["x-task-executor-execution-id"] for r in http_target.received()
    )
    assert set(per_execution) == set(seeded.execution_ids)
    assert set(per_execution.values()) == {1}
    assert statuses(database, seeded.execution_ids) == {"SUCCESS": 400}
    owners = database.run(
        "SELECT worker_id, count(*) AS n FROM executions WHERE status = 'SUCCESS' "
        "GROUP BY worker_id"
    )
    assert {row["worker_id"] for row in owners} <= {"w0", "w1"}


def test_claim_returns_at_most_the_batch_and_only_due_rows(database: Database) -> None:
    seeded = seed(database, spec=http_spec("http://example.test/"), count=5)
    database.run(
        "UPDATE executions SET run_at = now() + INTERVAL '1 hour' WHERE execution_id = :id",
        id=seeded.execution_ids[0],
    )
    first = SkipLockedClaim().claim(database, "w", 3)
    second = ConditionalUpdateClaim().claim(database, "w", 3)
    assert (len(first), len(second)) == (3, 1)
    assert seeded.execution_ids[0] not in {c.execution_id for c in first + second}
    assert statuses(database, seeded.execution_ids) == {"RUNNING": 4, "QUEUED": 1}


def _plan(database: Database, sql: str, **params: object) -> str:
    rows = database.run("EXPLAIN " + sql, **params)
    return "\n".join(str(next(iter(row.values()))) for row in rows)


def test_claim_queries_use_the_pickup_index(database: Database) -> None:
    # 20,000 terminal rows of history and 50 due ones, with fresh statistics.
    seeded = seed(database, spec=http_spec("http://example.test/"), count=1)
    database.run(
        "INSERT INTO executions (job_id, endpoint, endpoint_type, status, run_at) "
        "SELECT :job, :endpoint, 'HTTP', "
        "CASE WHEN g <= 20000 THEN 'SUCCESS' ELSE 'QUEUED' END, "
        "now() - g * INTERVAL '1 second' FROM generate_series(1, 20050) AS g",
        job=seeded.job_id,
        endpoint=seeded.endpoint,
    )
    database.run("ANALYZE executions")

    skip_locked = _plan(
        database, render("worker_claim_skip_locked", ALL_REGIONS), worker_id="w", batch=50
    )
    candidates = _plan(database, render("worker_claim_candidates", ALL_REGIONS), batch=50)

    assert "idx_executions_pickup" in skip_locked, skip_locked
    assert "idx_executions_pickup" in candidates, candidates
    assert "Seq Scan on executions" not in skip_locked + candidates
