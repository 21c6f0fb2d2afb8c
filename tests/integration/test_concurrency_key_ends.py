"""The other ends and re-queues of gated executions, through the API without a worker: a
batch cancel, a bulk cancel, a redrive, a reschedule and a cron job's pause each settle the
key in their own transaction, so the room a cancelled or moved execution held goes to the
next one waiting, and a re-queued one queues for a turn."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from chalicelib.db.connection import Database
from chalicelib.scheduler.bulk import BulkOperator
from chalicelib.scheduler.materializer import CronMaterializer
from chalicelib.services.operations import OperationService
from tests.support.api_client import ApiClient
from tests.support.concurrency import batch, post, released
from tests.support.factories import register_endpoint
from tests.support.seed.worker import statuses


def _limited(api: ApiClient, name: str, per_key: int = 1) -> None:
    register_endpoint(api, name, flow_control={"max_concurrency_per_key": per_key})


def test_a_batch_cancel_gives_the_room_to_the_next_outside_the_batch(
    api: ApiClient, database: Database
) -> None:
    _limited(api, "batched")
    ids = batch(api, "batched", [("b0", "t"), ("b1", "t")])
    later = post(api, "batched", "after", "t")
    [batch_id] = {
        r["batch_id"]
        for r in database.run(
            "SELECT batch_id FROM executions WHERE execution_id = ANY(:ids)", ids=ids
        )
    }
    assert released(database, [*ids, later]) == {ids[0]}
    assert api.post(f"/batches/{batch_id}/cancel").status == 200
    assert statuses(database, ids) == {"CANCELLED": 2}
    assert released(database, [later]) == {later}


def test_a_bulk_cancel_gives_the_room_to_the_next(api: ApiClient, database: Database) -> None:
    _limited(api, "bulky")
    ids = [post(api, "bulky", f"k{i}", "t") for i in range(2)]
    database.execute(  # only the first in the bulk action's filter
        "UPDATE executions SET created_at = now() - INTERVAL '1 hour' WHERE execution_id = :id",
        id=ids[0],
    )
    before = (datetime.now(UTC) - timedelta(minutes=30)).isoformat()
    filters = {"endpoint": "bulky", "created_before": before}
    reply = api.post("/executions/bulk", {"action": "cancel", "filter": filters})
    assert reply.status == 202, reply.body
    operator = BulkOperator(OperationService(database))
    while operator.run_once().more:
        pass
    assert statuses(database, ids[:1]) == {"CANCELLED": 1}
    assert released(database, ids[1:]) == {ids[1]}


def test_a_redriven_dead_letter_queues_for_a_turn(api: ApiClient, database: Database) -> None:
    _limited(api, "redo")
    ids = [post(api, "redo", f"k{i}", "t") for i in range(2)]
    database.execute(  # the first ended FAILED (its key settled by its end: see the worker
        # tests), the second holds the room and has started
        "UPDATE executions SET status = CASE WHEN execution_id = :a THEN 'FAILED'"
        " ELSE 'RUNNING' END, attempt_count = 1, completed_at = now(), started_at = now(),"
        " ordering_wait = FALSE WHERE execution_id = ANY(:ids)",
        a=ids[0],
        ids=ids,
    )
    since = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    until = (datetime.now(UTC) + timedelta(minutes=1)).isoformat()
    redriven = api.post("/endpoints/redo/redrive", {"since": since, "until": until})
    assert redriven.status == 200, redriven.body
    assert redriven.body["requeued"] == 1
    assert statuses(database, ids[:1]) == {"QUEUED": 1}
    assert released(database, ids[:1]) == set()  # the running one holds the room


def test_a_rescheduled_delayed_job_takes_its_new_time_as_its_place(
    api: ApiClient, database: Database
) -> None:
    _limited(api, "moved")
    soon = (datetime.now(UTC) + timedelta(minutes=5)).isoformat()
    first = api.post(
        "/jobs",
        {
            "endpoint": "moved",
            "trigger": "DELAYED",
            "run_at": soon,
            "idempotency_key": "d",
            "concurrency_key": "t",
        },
    )
    assert first.status == 201, first.body
    delayed = first.body["execution"]["execution_id"]
    later = (datetime.now(UTC) + timedelta(hours=2)).isoformat()
    second = post(api, "moved", "d2", "t", trigger="DELAYED", run_at=later)
    assert released(database, [delayed, second]) == {delayed}
    in_three_hours = (datetime.now(UTC) + timedelta(hours=3)).isoformat()
    moved = api.put(f"/jobs/{first.body['job_id']}", {"run_at": in_three_hours})
    assert moved.status == 200, moved.body
    assert released(database, [delayed, second]) == {second}  # now placed after it


def test_pausing_a_cron_job_cancels_its_ticks_ahead_and_frees_their_room(
    api: ApiClient, database: Database
) -> None:
    _limited(api, "ticks")
    body = {
        "endpoint": "ticks",
        "trigger": "CRON",
        "cron": "0 9 * * *",
        "timezone": "UTC",
        "concurrency_key": "t",
    }
    job_id = api.post("/jobs", body).body["job_id"]
    ahead = datetime.now(UTC) + timedelta(days=2)
    CronMaterializer(database, clock=lambda: ahead).run_once()
    ticks = [
        r["execution_id"]
        for r in database.run(
            "SELECT execution_id FROM executions WHERE job_id = :j ORDER BY run_at", j=job_id
        )
    ]
    assert released(database, ticks) == {ticks[0]}
    other = post(api, "ticks", "n", "t", trigger="DELAYED", delay="10d")  # after the ticks
    assert released(database, [other]) == set()
    assert api.post(f"/jobs/{job_id}/pause").status == 200
    assert statuses(database, ticks) == {"CANCELLED": len(ticks)}
    assert released(database, [other]) == {other}
