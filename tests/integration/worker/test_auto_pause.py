"""Endpoints that pause themselves, against the real database, a real worker and a real
HTTP target on loopback: a 410 Gone pauses its endpoint (GONE), every attempt failing for
longer than auto_pause_after_ms pauses it (FAILING, judged by the housekeeper on an
injected clock), a pause by hand is OPERATOR; the reason shows, a resume clears it, each
automatic pause is counted once in /metrics and sent to TE_OPERATOR_ENDPOINT."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from chalicelib.db.connection import Database
from chalicelib.domain.auto_pause import PausedReason
from chalicelib.scheduler.housekeeper import Housekeeper
from chalicelib.services import auto_pause
from chalicelib.services.endpoints import EndpointService
from chalicelib.worker import Worker
from tests.integration.test_metrics import scrape
from tests.support.api_client import ApiClient
from tests.support.clock import FakeClock
from tests.support.seed.worker import (
    Seeded,
    attempts,
    execution,
    http_spec,
    make_due,
    retry_policy,
    seed,
    statuses,
)
from tests.support.served import HttpTarget, Reply
from tests.support.waiting import wait_for
from tests.support.worker_runs import settle

#: The finalize's path (one statement or a transaction) depends on the claim strategy: make
#: test runs these again in CockroachDB's configuration (test-cockroach).
pytestmark = pytest.mark.claim_path

COUNTER = "te_endpoint_auto_paused_total"


def _endpoint(api: ApiClient, name: str) -> dict[str, Any]:
    reply = api.get(f"/endpoints/{name}")
    assert reply.status == 200, reply.body
    return reply.body


def _deliver_once(worker: Worker) -> None:
    worker.run_once()
    worker.drain(10)


def _more(db: Database, seeded: Seeded, count: int = 1) -> list[str]:
    """``count`` more due executions of the seeded job (its endpoint's later work)."""
    rows = db.run(
        "INSERT INTO executions (job_id, endpoint, endpoint_type, status, input, "
        "max_attempts, idempotency_key) SELECT e.job_id, e.endpoint, e.endpoint_type, "
        "'QUEUED', e.input, e.max_attempts, 'more-' || CAST(gen_random_uuid() AS TEXT) "
        "FROM executions AS e CROSS JOIN generate_series(1, :n) AS g "
        "WHERE e.execution_id = :id RETURNING execution_id",
        id=seeded.execution_id,
        n=count,
    )
    return [r["execution_id"] for r in rows]


def _counted(api: ApiClient, endpoint: str) -> dict[str, float]:
    samples = scrape(api)
    return {
        reason: samples[(COUNTER, (("endpoint", endpoint), ("reason", reason)))]
        for reason in ("FAILING", "GONE")
    }


def _operator_spec(http_target: HttpTarget) -> dict[str, Any]:
    """An operator endpoint: it posts each event it gets, as is."""
    return http_spec(http_target.url("/ops"), body_template="{{input}}")


def _event_jobs(db: Database, operator: str) -> list[dict[str, Any]]:
    return db.run(
        "SELECT j.idempotency_key, e.input, e.status FROM jobs AS j "
        "JOIN executions AS e ON e.job_id = j.job_id WHERE j.endpoint = :e "
        "ORDER BY j.created_at",
        e=operator,
    )


# -- 410 Gone ------------------------------------------------------------------------------


def test_a_410_pauses_its_endpoint_and_the_attempt_waits_for_a_resume(
    api: ApiClient, database: Database, make_worker: Callable[..., Worker], http_target: HttpTarget
) -> None:
    http_target.script("/gone", Reply(410, body="gone"), Reply(200))
    seeded = seed(
        database,
        spec=http_spec(http_target.url("/gone")),
        policy=retry_policy(max_attempts=3, initial_delay_ms=10, max_delay_ms=10),
    )
    later = _more(database, seeded, 2)
    clock = FakeClock(datetime.now(UTC))
    # One delivery: the 410 comes first. The pause is stamped by the worker's clock.
    worker = make_worker(worker_max_concurrent=1, clock=clock)

    _deliver_once(worker)

    body = _endpoint(api, seeded.endpoint)
    assert body["paused_reason"] == "GONE"
    assert datetime.fromisoformat(body["paused_at"]) == clock()
    [attempt] = attempts(database, seeded.execution_id)
    assert attempt["error"]["status_code"] == 410
    # The 410's execution keeps its retry policy: it waits, as the endpoint's other work.
    assert execution(database, seeded.execution_id)["status"] == "RETRYING"
    make_due(database, [seeded.execution_id, *later])
    _deliver_once(worker)
    assert len(http_target.received("/gone")) == 1
    assert statuses(database, later) == {"QUEUED": 2}

    resumed = api.post(f"/endpoints/{seeded.endpoint}/resume")
    assert resumed.status == 200 and resumed.body["paused_reason"] is None
    assert resumed.body["paused_at"] is None
    # The worker sees the resume at its next read of the paused endpoints (a poll).
    assert settle(worker, database, [seeded.execution_id, *later]) == {"SUCCESS": 3}


def test_a_410_listed_as_expected_is_a_success_and_pauses_nothing(
    api: ApiClient, database: Database, make_worker: Callable[..., Worker], http_target: HttpTarget
) -> None:
    http_target.script("/gone", Reply(410))
    seeded = seed(
        database, spec=http_spec(http_target.url("/gone"), expected_status_codes=[200, 410])
    )
    _deliver_once(make_worker())
    assert execution(database, seeded.execution_id)["status"] == "SUCCESS"
    assert _endpoint(api, seeded.endpoint)["paused_reason"] is None


def test_a_gone_pause_is_counted_once_and_survives_a_worker_restart(
    api: ApiClient, database: Database, make_worker: Callable[..., Worker], http_target: HttpTarget
) -> None:
    http_target.script("/gone", Reply(410))
    seeded = seed(database, spec=http_spec(http_target.url("/gone")), count=3)
    other = seed(database, spec=http_spec(http_target.url("/fine")))
    assert _counted(api, seeded.endpoint) == {"FAILING": 0, "GONE": 0}  # before the first
    first = make_worker()

    _deliver_once(first)  # three 410s in one batch, or in several: one pause

    assert _counted(api, seeded.endpoint) == {"FAILING": 0, "GONE": 1}
    assert _counted(api, other.endpoint) == {"FAILING": 0, "GONE": 0}
    paused_at = _endpoint(api, seeded.endpoint)["paused_at"]
    first.stop()
    first.drain(5)
    first.close()

    later = _more(database, seeded)
    restarted = make_worker()
    _deliver_once(restarted)
    assert statuses(database, later) == {"QUEUED": 1}  # still paused after the restart
    assert _endpoint(api, seeded.endpoint)["paused_at"] == paused_at
    assert _counted(api, seeded.endpoint)["GONE"] == 1

    api.post(f"/endpoints/{seeded.endpoint}/resume")
    settle(restarted, database, later)  # 410 again: a new pause, counted again
    assert _endpoint(api, seeded.endpoint)["paused_reason"] == "GONE"
    assert _counted(api, seeded.endpoint)["GONE"] == 2


def test_pausing_an_endpoint_that_is_already_paused_changes_and_counts_nothing(
    api: ApiClient, database: Database
) -> None:
    seeded = seed(database, spec=http_spec("http://127.0.0.1:9/x"))
    now = datetime.now(UTC)

    def gone(tx: Any) -> list[auto_pause.Paused]:
        return auto_pause.pause(
            tx, [seeded.endpoint], PausedReason.GONE, now=now, operator_endpoint=None
        )

    assert [p.endpoint for p in database.transaction(gone)] == [seeded.endpoint]
    assert database.transaction(gone) == []  # a second 410, a retried statement
    assert _counted(api, seeded.endpoint)["GONE"] == 1

    # A pause by hand first: a 410 then neither changes its reason nor counts.
    other = seed(database, spec=http_spec("http://127.0.0.1:9/x"))
    EndpointService(database).pause(other.endpoint)
    database.transaction(
        lambda tx: auto_pause.pause(
            tx, [other.endpoint], PausedReason.GONE, now=now, operator_endpoint=None
        )
    )
    assert _endpoint(api, other.endpoint)["paused_reason"] == "OPERATOR"
    assert _counted(api, other.endpoint)["GONE"] == 0


# -- the operator event ------------------------------------------------------------------------


def test_the_pause_is_sent_to_the_operator_endpoint_as_an_immediate_job(
    api: ApiClient, database: Database, make_worker: Callable[..., Worker], http_target: HttpTarget
) -> None:
    http_target.script("/gone", Reply(410))
    operator = seed(database, spec=_operator_spec(http_target), count=1)
    seeded = seed(database, spec=http_spec(http_target.url("/gone")))
    worker = make_worker(operator_endpoint=operator.endpoint, worker_max_concurrent=1)

    _deliver_once(worker)  # the operator's seeded execution, then the 410
    _deliver_once(worker)

    body = _endpoint(api, seeded.endpoint)
    [event] = [j for j in _event_jobs(database, operator.endpoint) if j["idempotency_key"]]
    assert event["input"] == {
        "type": "endpoint.paused",
        "endpoint": seeded.endpoint,
        "reason": "GONE",
        "at": body["paused_at"],
    }
    assert event["idempotency_key"].startswith(f"endpoint.paused:{seeded.endpoint}:")
    wait_for(
        lambda: _deliver_once(worker) or [r.json() for r in http_target.received("/ops")],
        "the event delivered",
        until=lambda delivered: event["input"] in delivered,  # an ordinary IMMEDIATE job
    )


def test_a_retried_pause_transaction_creates_one_event(api: ApiClient, database: Database) -> None:
    """The pause and its event commit together; a transaction retried after a conflict
    (40001) runs its work twice and leaves one pause and one event job."""
    operator = seed(database, spec=http_spec("http://127.0.0.1:9/ops"), count=1)
    seeded = seed(database, spec=http_spec("http://127.0.0.1:9/x"))
    tries = []

    def pause_then_conflict(tx: Any) -> list[auto_pause.Paused]:
        paused = auto_pause.pause(
            tx,
            [seeded.endpoint],
            PausedReason.GONE,
            now=datetime.now(UTC),
            operator_endpoint=operator.endpoint,
        )
        tries.append(paused)
        if len(tries) == 1:  # as a conflict with another transaction would
            tx.run("DO $$ BEGIN RAISE EXCEPTION 'forced' USING ERRCODE = '40001'; END $$")
        return paused

    database.transaction(pause_then_conflict, name="forced")

    assert len(tries) == 2
    events = [j for j in _event_jobs(database, operator.endpoint) if j["idempotency_key"]]
    assert [j["input"]["endpoint"] for j in events] == [seeded.endpoint]
    assert _counted(api, seeded.endpoint)["GONE"] == 1


def test_a_missing_operator_endpoint_leaves_the_pause_and_a_warning(
    api: ApiClient,
    database: Database,
    make_worker: Callable[..., Worker],
    http_target: HttpTarget,
    caplog: pytest.LogCaptureFixture,
) -> None:
    http_target.script("/gone", Reply(410))
    seeded = seed(database, spec=http_spec(http_target.url("/gone")))
    worker = make_worker(operator_endpoint="nobody-home")

    with caplog.at_level(logging.WARNING, logger="chalicelib.services.auto_pause"):
        _deliver_once(worker)

    assert _endpoint(api, seeded.endpoint)["paused_reason"] == "GONE"
    assert execution(database, seeded.execution_id)["status"] == "FAILED"  # recorded too
    [warning] = [r for r in caplog.records if r.getMessage() == "endpoint_paused_event_not_sent"]
    assert warning.__dict__["operator_endpoint"] == "nobody-home"
    assert "does not exist" in warning.__dict__["error"]
    assert _counted(api, seeded.endpoint)["GONE"] == 1


def test_a_paused_operator_endpoint_keeps_its_event_waiting(
    api: ApiClient, database: Database, make_worker: Callable[..., Worker], http_target: HttpTarget
) -> None:
    http_target.script("/gone", Reply(410))
    operator = seed(database, spec=_operator_spec(http_target), status="SUCCESS")
    EndpointService(database).pause(operator.endpoint)
    seeded = seed(database, spec=http_spec(http_target.url("/gone")))
    worker = make_worker(operator_endpoint=operator.endpoint)

    _deliver_once(worker)
    _deliver_once(worker)

    [event] = [j for j in _event_jobs(database, operator.endpoint) if j["idempotency_key"]]
    assert event["input"]["endpoint"] == seeded.endpoint
    assert event["status"] == "QUEUED"  # waits for the operator endpoint's resume
    assert http_target.received("/ops") == []
    api.post(f"/endpoints/{operator.endpoint}/resume")
    delivered = wait_for(
        lambda: _deliver_once(worker) or http_target.received("/ops"), "the event delivered"
    )
    assert [r.json()["reason"] for r in delivered] == ["GONE"]


# -- FAILING ---------------------------------------------------------------------------------


def _failing_endpoint(database: Database, http_target: HttpTarget, window_ms: int | None) -> Seeded:
    http_target.script("/down", Reply(500, body="down"))
    seeded = seed(database, spec=http_spec(http_target.url("/down")))
    database.run(
        "UPDATE endpoints SET auto_pause_after_ms = CAST(:ms AS BIGINT) WHERE name = :name",
        ms=window_ms,
        name=seeded.endpoint,
    )
    return seeded


def _fail_once(database: Database, worker: Worker, seeded: Seeded) -> None:
    ids = _more(database, seeded)
    _deliver_once(worker)
    assert statuses(database, ids) == {"FAILED": 1}


def test_an_endpoint_failing_for_longer_than_its_window_pauses_as_failing(
    api: ApiClient, database: Database, make_worker: Callable[..., Worker], http_target: HttpTarget
) -> None:
    """The housekeeper's clock moves minutes at a time: each pass first rolls up the
    minute rows older than three minutes, which the rule then counts."""
    seeded = _failing_endpoint(database, http_target, 600_000)  # ten minutes
    operator = seed(database, spec=_operator_spec(http_target), status="SUCCESS")
    clock = FakeClock(datetime.now(UTC))
    housekeeper = Housekeeper(
        database, retention_days=0, clock=clock, operator_endpoint=operator.endpoint
    )
    worker = make_worker()
    housekeeper.run_once()  # first sight: nothing counted yet

    _deliver_once(worker)  # the seeded execution fails
    clock.advance(minutes=5)
    housekeeper.run_once()  # new failures, no success: the stretch begins here
    _fail_once(database, worker, seeded)
    clock.advance(minutes=5)
    housekeeper.run_once()  # five minutes of failures only: not yet
    _fail_once(database, worker, seeded)
    clock.advance(minutes=4, seconds=59)
    housekeeper.run_once()  # 9:59
    assert _endpoint(api, seeded.endpoint)["paused_reason"] is None

    _fail_once(database, worker, seeded)
    clock.advance(seconds=1)
    housekeeper.run_once()  # ten minutes of failures only: paused

    body = _endpoint(api, seeded.endpoint)
    assert body["paused_reason"] == "FAILING"
    assert datetime.fromisoformat(body["paused_at"]) == clock()
    assert _counted(api, seeded.endpoint) == {"FAILING": 1, "GONE": 0}
    [event] = [j for j in _event_jobs(database, operator.endpoint) if j["idempotency_key"]]
    assert event["input"] == {
        "type": "endpoint.paused",
        "endpoint": seeded.endpoint,
        "reason": "FAILING",
        "at": body["paused_at"],
    }
    later = _more(database, seeded)
    _deliver_once(worker)
    assert statuses(database, later) == {"QUEUED": 1}  # its work waits

    # Resumed, the next failure starts a new stretch rather than pausing at once.
    api.post(f"/endpoints/{seeded.endpoint}/resume")
    settle(worker, database, later)
    clock.advance(minutes=20)
    housekeeper.run_once()
    assert _endpoint(api, seeded.endpoint)["paused_reason"] is None
    assert _counted(api, seeded.endpoint)["FAILING"] == 1


def test_a_success_within_the_window_ends_the_stretch(
    api: ApiClient, database: Database, make_worker: Callable[..., Worker], http_target: HttpTarget
) -> None:
    seeded = _failing_endpoint(database, http_target, 600_000)
    clock = FakeClock(datetime.now(UTC))
    housekeeper = Housekeeper(database, retention_days=0, clock=clock)
    worker = make_worker()
    housekeeper.run_once()
    _deliver_once(worker)
    clock.advance(minutes=5)
    housekeeper.run_once()  # failing since here

    http_target.script("/down", Reply(200))
    settle(worker, database, _more(database, seeded))  # a success
    http_target.script("/down", Reply(500))
    _fail_once(database, worker, seeded)
    clock.advance(minutes=10)
    housekeeper.run_once()  # failures, but a success too: a new stretch at most

    assert _endpoint(api, seeded.endpoint)["paused_reason"] is None
    _fail_once(database, worker, seeded)
    clock.advance(minutes=5)
    housekeeper.run_once()  # failures only since the last pass: a new stretch begins
    assert _endpoint(api, seeded.endpoint)["paused_reason"] is None
    _fail_once(database, worker, seeded)
    clock.advance(minutes=10)
    housekeeper.run_once()  # ten minutes of the new stretch
    assert _endpoint(api, seeded.endpoint)["paused_reason"] == "FAILING"


def test_a_null_window_never_pauses_for_failing(
    api: ApiClient, database: Database, make_worker: Callable[..., Worker], http_target: HttpTarget
) -> None:
    seeded = _failing_endpoint(database, http_target, None)
    clock = FakeClock(datetime.now(UTC))
    housekeeper = Housekeeper(database, retention_days=0, clock=clock)
    worker = make_worker()
    for _ in range(3):
        _fail_once(database, worker, seeded)
        clock.advance(days=31)
        housekeeper.run_once()

    assert _endpoint(api, seeded.endpoint)["paused_reason"] is None
    assert _counted(api, seeded.endpoint)["FAILING"] == 0
    remembered = database.run("SELECT endpoint FROM endpoint_failing")
    assert seeded.endpoint not in [r["endpoint"] for r in remembered]  # never judged


def test_the_watch_reads_a_page_at_a_time_and_comes_back_for_the_rest(
    database: Database,
) -> None:
    names = [seed(database, spec=http_spec("http://127.0.0.1:9/x")).endpoint for _ in range(5)]
    watch = auto_pause.FailingWatch(database, operator_endpoint=None, batch_size=2)
    now = datetime.now(UTC)
    fulls = [watch.run(now)[1] for _ in range(4)]
    assert fulls == [True, True, False, True]  # 2 + 2 + 1, then from the start again
    remembered = database.run("SELECT endpoint FROM endpoint_failing ORDER BY endpoint")
    assert [r["endpoint"] for r in remembered] == sorted(names)


# -- by hand ---------------------------------------------------------------------------------


def test_a_pause_by_hand_is_operator_and_a_resume_clears_it(
    api: ApiClient, database: Database
) -> None:
    seeded = seed(database, spec=http_spec("http://127.0.0.1:9/x"))
    paused = api.post(f"/endpoints/{seeded.endpoint}/pause")
    assert paused.status == 200 and paused.body["paused_reason"] == "OPERATOR"
    listed = api.get("/endpoints?paused=true").body["items"]
    assert [(e["name"], e["paused_reason"]) for e in listed] == [(seeded.endpoint, "OPERATOR")]
    resumed = api.post(f"/endpoints/{seeded.endpoint}/resume")
    assert resumed.body["paused_reason"] is None
    assert _counted(api, seeded.endpoint) == {"FAILING": 0, "GONE": 0}  # by hand: not counted


def test_a_name_registered_again_starts_with_no_failing_stretch(
    api: ApiClient, database: Database, make_worker: Callable[..., Worker], http_target: HttpTarget
) -> None:
    """What the FAILING rule remembered of a deleted endpoint is not held against the new
    endpoint registered under its name: its first failure starts a stretch of its own."""
    seeded = _failing_endpoint(database, http_target, 600_000)
    clock = FakeClock(datetime.now(UTC))
    housekeeper = Housekeeper(database, retention_days=0, clock=clock)
    worker = make_worker()
    housekeeper.run_once()
    _deliver_once(worker)
    clock.advance(minutes=5)
    housekeeper.run_once()  # failing since here
    database.run("UPDATE endpoints SET deleted_at = now() WHERE name = :n", n=seeded.endpoint)
    clock.advance(minutes=30)

    created = api.post(
        "/endpoints",
        {
            "name": seeded.endpoint,
            "type": "HTTP",
            "spec": http_spec(http_target.url("/down")),
            "auto_pause_after_ms": 600_000,
        },
    )
    assert created.status == 201, created.body
    _fail_once(database, worker, seeded)
    clock.advance(minutes=5)
    housekeeper.run_once()  # its first failures: 35 minutes after the old stretch began

    assert _endpoint(api, seeded.endpoint)["paused_reason"] is None
    _fail_once(database, worker, seeded)
    clock.advance(minutes=5)
    housekeeper.run_once()  # failing since here: its own stretch begins
    _fail_once(database, worker, seeded)
    clock.advance(minutes=10)
    housekeeper.run_once()  # ten minutes of its own stretch
    assert _endpoint(api, seeded.endpoint)["paused_reason"] == "FAILING"
