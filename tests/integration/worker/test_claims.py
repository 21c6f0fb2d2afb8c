"""Claim strategies: disjoint claims under concurrency, and the claim stays on its index."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from chalicelib.db.connection import Database
from chalicelib.db.queries import Query
from chalicelib.db.shapes import shaped
from chalicelib.domain.regions import ALL_REGIONS
from chalicelib.worker.postgres import PostgresStore
from chalicelib.worker.strategies import (
    ClaimLimits,
    ConditionalUpdateClaim,
    SkipLockedClaim,
    claim_strategy,
    render,
)
from tests.support.environment import PROFILE
from tests.support.seed.worker import http_spec, seed, statuses
from tests.support.served import HttpTarget
from tests.support.waiting import wait_for

#: The claim or the wake-up decides what these tests see: make test runs them again in
#: CockroachDB's configuration (test-cockroach).
pytestmark = pytest.mark.claim_path

#: Both strategies, every run; the skip_locked cases are PostgreSQL's, left to the first pass.
STRATEGIES = [
    pytest.param("skip_locked", marks=pytest.mark.postgres_only),
    "conditional_update",
]


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
        # The wait's timeout: a claim that fails on every round (bad SQL) must fail the
        # test, not leave it waiting forever while the workers log and retry.
        def progress() -> dict[str, int]:
            assert any(t.is_alive() for t in threads)
            return statuses(database, seeded.execution_ids)

        # Done when all are delivered, or as soon as one was sent twice (asserted below).
        wait_for(
            progress,
            "400 delivered",
            until=lambda counts: (
                counts.get("SUCCESS", 0) >= 400 or len(http_target.received()) > 400
            ),
            timeout=120,
            interval=0.05,
        )
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


def _plan(database: Database, query: Query, params: dict[str, object]) -> str:
    rows = database.run("EXPLAIN " + query.sql, **params)
    return "\n".join(str(next(iter(row.values()))) for row in rows)


#: Executions seeded for the plan tests: 20,000 terminal rows of history and 50 due ones,
#: or a due backlog of 20,000 (on (status, run_at) the claim read and sorted all of them:
#: a sequential scan and a sort, 10 ms a claim; idx_executions_due reads :batch rows in
#: run_at order and stops).
POPULATIONS = {
    "terminal_history": "CASE WHEN g <= 20000 THEN 'SUCCESS' ELSE 'QUEUED' END, "
    "now() - g * INTERVAL '1 second' FROM generate_series(1, 20050) AS g",
    "due_backlog": "CASE WHEN g % 10 = 0 THEN 'RETRYING' ELSE 'QUEUED' END, "
    "now() - g * INTERVAL '1 millisecond' FROM generate_series(1, 20000) AS g",
}


@pytest.mark.parametrize("population", sorted(POPULATIONS))
def test_claims_walk_the_due_index_whatever_the_history_or_backlog(
    database: Database, population: str
) -> None:
    seeded = seed(database, spec=http_spec("http://example.test/"), count=1)
    database.run(
        "INSERT INTO executions (job_id, endpoint, endpoint_type, status, run_at) "
        "SELECT :job, :endpoint, 'HTTP', " + POPULATIONS[population],
        job=seeded.job_id,
        endpoint=seeded.endpoint,
    )
    database.run("ANALYZE executions")

    for capped in (False, True):
        full = ("ep-hung",) if capped else ()  # an endpoint at its cap here, or none
        limits = ClaimLimits(full=full, busy={"ep-hung": 25}, excluded=("ep-paused",)).params()
        fairness = {k: limits[k] for k in ("default_cap", "full", "busy", "pending")}
        suffix = "_capped" if capped else ""  # the statement the worker sends then
        skip_locked = _plan(
            database,
            *shaped(
                render(f"worker_claim_skip_locked{suffix}", ALL_REGIONS),
                {"worker_id": "w", "batch": 50, **limits},
            ),
        )
        candidates = _plan(
            database,
            *shaped(
                render(f"worker_claim_candidates{suffix}", ALL_REGIONS), {"batch": 50, **fairness}
            ),
        )
        for plan in (skip_locked, candidates):
            assert "Seq Scan on executions" not in plan, plan
            if capped:  # each endpoint's oldest due rows, then their rows by key
                assert "idx_executions_due_by_endpoint" in plan, plan
            else:  # the walk in run_at order, :batch rows and no sort
                assert "using idx_executions_due on" in plan, plan
                assert "Sort Key: executions.run_at" not in plan, plan


def _strategy(name: str) -> SkipLockedClaim | ConditionalUpdateClaim:
    return SkipLockedClaim() if name == "skip_locked" else ConditionalUpdateClaim()


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_claim_passes_over_full_endpoints_and_cuts_the_rest_to_their_share(
    database: Database, strategy: str
) -> None:
    """Per-endpoint fairness: a full endpoint's backlog does not hide what is behind it, and
    no endpoint gets more than its cap minus what the worker already delivers for it."""
    hung = seed(database, spec=http_spec("http://example.test/hung"), count=6)
    partly = seed(database, spec=http_spec("http://example.test/slow"), count=6)
    healthy = seed(database, spec=http_spec("http://example.test/ok"), count=2)
    limits = ClaimLimits(
        default_cap=3, full=(hung.endpoint,), busy={hung.endpoint: 3, partly.endpoint: 1}
    )

    claimed = _strategy(strategy).claim(database, "w", 50, limits)

    per_endpoint = Counter(c.endpoint for c in claimed)
    assert per_endpoint == {partly.endpoint: 2, healthy.endpoint: 2}
    assert {c.endpoint_cap for c in claimed} == {None}  # no max_concurrent: the default
    assert statuses(database, hung.execution_ids) == {"QUEUED": 6}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_room_of_claims_in_flight_comes_off_every_endpoints_share(
    database: Database, strategy: str
) -> None:
    """A claim sized while others of the same worker are in flight (``pending``: their
    room) leaves that room out of every endpoint's share, the busy one's and the idle
    one's alike: the claims in flight may take all of it from either, and together they
    must not pass a cap."""
    busy = seed(database, spec=http_spec("http://example.test/busy"), count=6)
    idle = seed(database, spec=http_spec("http://example.test/idle"), count=6)
    limits = ClaimLimits(default_cap=4, busy={busy.endpoint: 1}, pending=2)

    claimed = _strategy(strategy).claim(database, "w", 50, limits)

    assert Counter(c.endpoint for c in claimed) == {busy.endpoint: 1, idle.endpoint: 2}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_an_endpoints_max_concurrent_overrides_the_default_share(
    database: Database, strategy: str
) -> None:
    capped = seed(database, spec=http_spec("http://example.test/", max_concurrent=1), count=4)
    claimed = _strategy(strategy).claim(database, "w", 50, ClaimLimits(default_cap=10))
    assert [(c.endpoint, c.endpoint_cap) for c in claimed] == [(capped.endpoint, 1)]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_claim_starts_a_lease(database: Database, strategy: str) -> None:
    seeded = seed(database, spec=http_spec("http://example.test/"), count=1)
    _strategy(strategy).claim(database, "w", 1, ClaimLimits(lease_ms=60_000))
    rows = database.run(
        "SELECT EXTRACT(EPOCH FROM lease_expires_at - started_at) AS lease FROM executions "
        "WHERE execution_id = :id",
        id=seeded.execution_id,
    )
    assert float(rows[0]["lease"]) == 60.0


def test_the_runs_claim_strategy_reaches_the_worker(make_worker) -> None:
    # make test's second pass (CockroachDB's configuration) must really claim with
    # conditional_update: every worker the fixtures build follows the run's setting.
    expected = PROFILE.get("TE_CLAIM_STRATEGY", "skip_locked")
    worker = make_worker()
    store = worker.store
    assert isinstance(store, PostgresStore)
    assert isinstance(store.strategy, type(claim_strategy(expected)))
