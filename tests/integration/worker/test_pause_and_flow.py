"""Pause, Retry-After holds and flow control in the claim, against
the real database: both claim strategies, a pause racing claims, two "workers" (worker
ids, threads) sharing one endpoint's limits."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chalicelib.db.connection import Database, Transaction
from chalicelib.db.queries import queries
from chalicelib.services.endpoints import EndpointService
from chalicelib.worker.strategies import ClaimLimits, MeteredClaim, claim_strategy
from tests.support.seed.worker import (
    attempts,
    claimed_execution,
    execution,
    http_spec,
    retry_policy,
    seed,
    statuses,
)
from tests.support.served import Reply
from tests.support.waiting import wait_for

#: The claim or the wake-up decides what these tests see: make test runs them again in
#: CockroachDB's configuration (test-cockroach).
pytestmark = pytest.mark.claim_path

STRATEGIES = ("skip_locked", "conditional_update")


def _claim(strategy: str, db: Database, batch: int, **limits: Any) -> list[str]:
    claimed = claim_strategy(strategy).claim(db, "w1", batch, ClaimLimits(**limits))
    return [c.endpoint for c in claimed]


def _flow(db: Database, name: str, flow: dict[str, Any], tokens: float = 0.0) -> None:
    """Give a seeded endpoint flow control (as PUT /endpoints does) and its bucket."""
    db.run(
        "UPDATE endpoints SET flow_control = CAST(:flow AS JSONB) WHERE name = :name",
        flow=json.dumps(flow),
        name=name,
    )
    db.run(
        "INSERT INTO endpoint_flow (endpoint, tokens) VALUES (:name, :tokens)",
        name=name,
        tokens=tokens,
    )


def _older(db: Database, name: str) -> None:
    """Make an endpoint's executions the oldest due (the head of the claim's index)."""
    db.run(
        "UPDATE executions SET run_at = now() - INTERVAL '1 hour' WHERE endpoint = :name",
        name=name,
    )


# -- pause and hold in the fast claim -----------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_paused_endpoint_is_passed_over_and_its_backlog_fills_no_claim(
    database: Database, strategy: str
) -> None:
    spec = http_spec("http://127.0.0.1:9/x")
    paused = seed(database, spec=spec, count=30)
    other = seed(database, spec=spec, count=5)
    _older(database, paused.endpoint)
    EndpointService(database).pause(paused.endpoint)

    # A worker whose list is stale: the endpoints join still refuses the paused rows.
    stale = _claim(strategy, database, 10)
    # A worker that has read the paused endpoint: they do not even take LIMIT room.
    informed = _claim(strategy, database, 10, excluded=(paused.endpoint,))

    assert paused.endpoint not in stale + informed
    assert informed.count(other.endpoint) + stale.count(other.endpoint) == 5
    assert len(informed) == 5 - len(stale)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_held_endpoint_is_passed_over_until_its_hold_ends(
    database: Database, strategy: str
) -> None:
    held = seed(database, spec=http_spec("http://127.0.0.1:9/x"), count=3)
    database.run("UPDATE endpoints SET held_until = now() + INTERVAL '1 hour'")
    assert _claim(strategy, database, 10) == []
    database.run("UPDATE endpoints SET held_until = now() - INTERVAL '1 second'")
    assert _claim(strategy, database, 10) == [held.endpoint] * 3


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_pause_binds_every_claim_that_starts_after_it(database: Database, strategy: str) -> None:
    """Pause racing claims: claims run in a loop while the pause commits; none that starts
    after POST .../pause has returned takes anything of the endpoint."""
    seeded = seed(database, spec=http_spec("http://127.0.0.1:9/x"), count=400)
    claims: list[tuple[float, int]] = []
    stop = threading.Event()

    def claim_in_a_loop() -> None:
        while not stop.is_set():
            started = time.monotonic()
            claims.append((started, len(_claim(strategy, database, 2))))

    thread = threading.Thread(target=claim_in_a_loop)
    thread.start()
    try:
        # The race is on.
        wait_for(lambda: sum(n for _, n in claims), "6 claimed", until=lambda n: n >= 6)
        EndpointService(database).pause(seeded.endpoint)
        paused = time.monotonic()  # orders the claims: before or after the pause
        wait_for(
            lambda: sum(1 for started, _ in claims if started > paused),
            "5 claims after the pause",
            until=lambda n: n >= 5,
            interval=0.005,
        )
    finally:
        stop.set()
        thread.join()

    before = sum(n for started, n in claims if started <= paused)
    after = [n for started, n in claims if started > paused]
    assert before >= 6 and len(after) >= 5
    assert after == [0] * len(after)
    left = database.run(
        "SELECT count(*) AS n FROM executions WHERE endpoint = :e AND status = 'QUEUED'",
        e=seeded.endpoint,
    )[0]["n"]
    assert left == 400 - before - sum(after) and left > 0
    EndpointService(database).resume(seeded.endpoint)
    assert len(_claim(strategy, database, 5)) == 5


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_flow_controlled_endpoints_are_left_to_the_metered_claim(
    database: Database, strategy: str
) -> None:
    metered = seed(database, spec=http_spec("http://127.0.0.1:9/x"), count=3)
    _flow(database, metered.endpoint, {"max_concurrency": 50})
    assert _claim(strategy, database, 10) == []


# -- the metered claim ----------------------------------------------------------------------


def _metered(db: Database, worker: str, name: str, batch: int = 50) -> list[str]:
    claimed = MeteredClaim().claim(db, worker, batch, ClaimLimits(), (name,))
    return [c.execution_id for c in claimed]


def _finish(db: Database, ids: list[str]) -> None:
    db.run(
        "UPDATE executions SET status = 'SUCCESS' WHERE execution_id = ANY(CAST(:ids AS TEXT[]))",
        ids=ids,
    )


def test_a_worker_without_room_leaves_a_due_metered_claim_due(
    database: Database, make_worker: Any
) -> None:
    """A claimer pass that finds every slot held makes no claim at all: the metered claim
    it was due to make is not spent on a pass with no room (it runs at most once per
    METERED_INTERVAL), so the flow-controlled endpoint gets the first room that frees."""
    metered = seed(database, spec=http_spec("http://127.0.0.1:9/x"), count=3)
    _flow(database, metered.endpoint, {"max_concurrency": 50})
    worker = make_worker(worker_max_concurrent=2)
    held = [claimed_execution(f"held-{i}", "held") for i in range(2)]
    worker.ledger.take(held, time.monotonic())

    assert worker.claimer.run_once() == 0
    assert statuses(database, metered.execution_ids) == {"QUEUED": 3}
    for execution_held in held:
        worker.ledger.release(execution_held.execution_id, execution_held.attempt)
    # At once, not a metered interval later: its share of the 2 slots.
    assert worker.claimer.run_once() == 1
    assert statuses(database, metered.execution_ids) == {"RUNNING": 1, "QUEUED": 2}


def test_two_workers_at_once_never_exceed_max_concurrency(database: Database) -> None:
    seeded = seed(database, spec=http_spec("http://127.0.0.1:9/x"), count=60)
    _flow(database, seeded.endpoint, {"max_concurrency": 7})
    taken: list[str] = []
    workers = ("w1", "w2", "w3", "w4")
    go = threading.Barrier(len(workers))

    def worker(worker_id: str) -> None:
        go.wait()  # the first claims race: each would take 5 if it saw the others' none
        for _ in range(5):
            taken.extend(_metered(database, worker_id, seeded.endpoint, batch=5))

    threads = [threading.Thread(target=worker, args=(w,)) for w in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    running = database.run(
        "SELECT count(*) AS n FROM executions WHERE status = 'RUNNING' AND endpoint = :e",
        e=seeded.endpoint,
    )[0]["n"]
    assert len(taken) == len(set(taken)) == running == 7


def test_max_concurrency_counts_running_executions_of_every_worker(database: Database) -> None:
    seeded = seed(database, spec=http_spec("http://127.0.0.1:9/x"), count=10)
    _flow(database, seeded.endpoint, {"max_concurrency": 3})

    first = _metered(database, "w1", seeded.endpoint)
    second = _metered(database, "w2", seeded.endpoint)
    assert (len(first), second) == (3, [])
    _finish(database, first[:2])
    assert len(_metered(database, "w2", seeded.endpoint)) == 2


def test_the_rate_limit_grants_what_its_bucket_holds_and_debits_it(database: Database) -> None:
    seeded = seed(database, spec=http_spec("http://127.0.0.1:9/x"), count=20)
    # 5 per day: no measurable refill during the test; the bucket starts with 4 tokens.
    _flow(database, seeded.endpoint, {"rate_limit": {"limit": 5, "period_ms": 86_400_000}}, 4)

    assert len(_metered(database, "w1", seeded.endpoint)) == 4
    assert _metered(database, "w2", seeded.endpoint) == []
    [row] = database.run("SELECT tokens FROM endpoint_flow")
    assert 0 <= row["tokens"] < 0.01
    # A full bucket holds `limit`, however long it was idle.
    database.run("UPDATE endpoint_flow SET refilled_at = now() - INTERVAL '30 days'")
    assert len(_metered(database, "w1", seeded.endpoint, batch=50)) == 5


def _metered_serializable(db: Database, worker: str, name: str, batch: int) -> list[str]:
    """The metered claim at SERIALIZABLE (CockroachDB without READ COMMITTED): conflicts
    are 40001, which the transaction helper retries."""
    claimed = db.transaction(
        lambda tx: MeteredClaim().claim_in(tx, worker, batch, ClaimLimits(), (name,)),
        name="metered_serializable",
    )
    return [c.execution_id for c in claimed]


@pytest.mark.parametrize("isolation", ["read_committed", "serializable"])
def test_two_workers_claiming_at_once_never_overspend_the_bucket(
    database: Database, isolation: str
) -> None:
    seeded = seed(database, spec=http_spec("http://127.0.0.1:9/x"), count=60)
    _flow(database, seeded.endpoint, {"rate_limit": {"limit": 25, "period_ms": 86_400_000}}, 25)
    taken: list[str] = []
    go = threading.Barrier(2)
    claim = _metered if isolation == "read_committed" else _metered_serializable

    def worker(worker_id: str) -> None:
        go.wait()
        for _ in range(15):
            taken.extend(claim(database, worker_id, seeded.endpoint, batch=3))

    threads = [threading.Thread(target=worker, args=(w,)) for w in ("w1", "w2")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(taken) == len(set(taken)) == 25


def test_a_paused_flow_controlled_endpoint_gets_nothing(database: Database) -> None:
    seeded = seed(database, spec=http_spec("http://127.0.0.1:9/x"), count=4)
    _flow(database, seeded.endpoint, {"max_concurrency": 10})
    EndpointService(database).pause(seeded.endpoint)
    assert _metered(database, "w1", seeded.endpoint) == []
    EndpointService(database).resume(seeded.endpoint)
    assert len(_metered(database, "w1", seeded.endpoint)) == 4


# -- Retry-After holds the endpoint -------------------------------------------------------


def _another_execution(db: Database, job_id: str, endpoint: str) -> str:
    [row] = db.run(
        "INSERT INTO executions (job_id, endpoint, endpoint_type, status, input) "
        "VALUES (:job, :endpoint, 'HTTP', 'QUEUED', '{\"user_id\": \"u\"}') "
        "RETURNING execution_id",
        job=job_id,
        endpoint=endpoint,
    )
    return str(row["execution_id"])


@pytest.mark.parametrize(
    ("header", "hold_s"), [("30", 30), ("7200", 3600)], ids=["seconds", "capped"]
)
def test_retry_after_holds_the_whole_endpoint(
    database: Database, make_worker, http_target, header: str, hold_s: int
) -> None:
    http_target.script("/busy", Reply(429, headers={"Retry-After": header}), Reply(200))
    seeded = seed(
        database,
        spec=http_spec(http_target.url("/busy")),
        policy=retry_policy(max_attempts=2, initial_delay_ms=10, max_delay_ms=10),
    )
    worker = make_worker()
    worker.run_once()
    worker.drain(10)

    [endpoint] = database.run(
        "SELECT held_until, now() AS now FROM endpoints WHERE name = :n", n=seeded.endpoint
    )
    [refused] = attempts(database, seeded.execution_id)
    # Held for the Retry-After asked (as recorded): from the 429's answer, and no longer.
    assert endpoint["held_until"] >= refused["completed_at"] + timedelta(seconds=hold_s)
    assert endpoint["held_until"] <= endpoint["now"] + timedelta(seconds=hold_s)
    # Another execution of the endpoint, and the retry (due after 10 ms), wait for the hold.
    other = _another_execution(database, seeded.job_id, seeded.endpoint)
    time.sleep(0.05)  # the scenario: the retry (due after 10 ms) is due, yet held
    worker.controls.refresh(force=True)
    assert worker.controls.excluded == (seeded.endpoint,)
    assert worker.run_once() == 0
    assert len(http_target.received("/busy")) == 1

    database.run("UPDATE endpoints SET held_until = now() - INTERVAL '1 second'")
    time.sleep(0.05)  # one poll interval: the worker reads its list again
    assert worker.run_once() == 2
    worker.drain(10)
    assert execution(database, other)["status"] == "SUCCESS"
    assert execution(database, seeded.execution_id)["status"] == "SUCCESS"


def test_a_later_shorter_retry_after_does_not_shorten_the_hold(database: Database) -> None:
    seeded = seed(database, spec=http_spec("http://127.0.0.1:9/x"))
    later = datetime.now(UTC) + timedelta(minutes=20)
    database.run("UPDATE endpoints SET held_until = :t", t=later)

    database.run(queries["worker_hold_endpoints"], holds=json.dumps({seeded.endpoint: 5000}))
    [row] = database.run("SELECT held_until FROM endpoints")
    assert row["held_until"] == later

    database.run("UPDATE endpoints SET held_until = NULL")

    def hold_and_read(tx: Transaction) -> Any:
        tx.execute(queries["worker_hold_endpoints"], holds=json.dumps({seeded.endpoint: 5000}))
        return tx.one("SELECT held_until - now() AS left FROM endpoints")

    # One transaction, one now(): the hold is exactly the 5 s asked for.
    assert database.transaction(hold_and_read)["left"] == timedelta(seconds=5)


@pytest.mark.parametrize(
    ("name", "index", "params"),
    [
        (
            "worker_claim_metered",
            "idx_executions_due_by_endpoint",
            {
                "names": ["ep-a"],
                "allow": "{}",
                "batch": 10,
                "worker_id": "w",
                "lease_ms": 1000,
                "default_cap": 10,
                "busy": "{}",
                "pending": 0,
            },
        ),
        ("worker_controlled_endpoints", "idx_endpoints_controlled", {}),
    ],
)
def test_the_flow_statements_read_their_partial_indexes(
    database: Database, name: str, index: str, params: dict[str, object]
) -> None:
    def explain(tx: Any) -> str:
        # Sequential scans off: on tiny test tables the planner would rightly prefer them.
        tx.run("SET LOCAL enable_seqscan = off")
        rows = tx.run("EXPLAIN " + queries[name].sql, **params)
        return "\n".join(str(next(iter(r.values()))) for r in rows)

    assert index in database.transaction(explain)


def test_a_flow_controlled_endpoint_without_its_flow_row_is_never_claimed(
    database: Database,
) -> None:
    seeded = seed(database, spec=http_spec("http://127.0.0.1:9/x"), count=2)
    database.run(
        "UPDATE endpoints SET flow_control = CAST(:flow AS JSONB)",
        flow=json.dumps({"rate_limit": {"limit": 10, "period_ms": 1000}}),
    )
    assert _metered(database, "w1", seeded.endpoint) == []
    assert _claim("skip_locked", database, 10) == []
