"""Bulk actions through the API: POST /executions/bulk, GET /operations/{id} and POST
/operations/{id}/abort, with the scheduler's loop working through the pages."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from chalicelib.db.connection import Database
from chalicelib.scheduler.bulk import BulkOperator
from chalicelib.services.operations import OperationService
from tests.support.api_client import ApiClient
from tests.support.seed.dead_letters import assert_invalid, endpoint_with, fail
from tests.support.seed.worker import execution, statuses

PAGE = 2


@pytest.fixture
def small_pages(app_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> int:
    """The API's pages of PAGE executions (TE_BULK_PAGE_SIZE), set before it starts."""
    monkeypatch.setenv("TE_BULK_PAGE_SIZE", str(PAGE))
    return PAGE


def bulk(api: ApiClient, action: str, **filters: Any) -> dict[str, Any]:
    reply = api.post("/executions/bulk", {"action": action, "filter": filters})
    assert reply.status == 202, reply.body
    assert reply.headers["location"] == f"/operations/{reply.body['operation_id']}"
    return reply.body


def drain(database: Database, page_size: int = PAGE) -> int:
    """Run the loop's passes until no operation is running; the passes that read a page."""
    operator = BulkOperator(OperationService(database, page_size=page_size))
    pages = 0
    while operator.run_once().more:
        pages += 1
        assert pages < 100
    return pages


def progress(api: ApiClient, operation_id: str) -> tuple[str, int, int, int]:
    body = api.get(f"/operations/{operation_id}").body
    return body["state"], body["matched"], body["done"], body["refused"]


def set_status(database: Database, execution_ids: list[str], status: str) -> None:
    database.run(
        "UPDATE executions SET status = :status,"
        " completed_at = CASE WHEN :status IN ('SUCCESS', 'CANCELLED') THEN now() END"
        " WHERE execution_id = ANY(CAST(:ids AS TEXT[]))",
        ids=execution_ids,
        status=status,
    )


def add_failed(database: Database, like: str, count: int) -> list[str]:
    """``count`` FAILED executions of ``like``'s job, created now."""
    rows = database.run(
        "INSERT INTO executions (job_id, endpoint, endpoint_type, status, max_attempts,"
        " attempt_count, last_error_type, completed_at)"
        " SELECT job_id, endpoint, endpoint_type, 'FAILED', 1, 1, 'HTTP_ERROR', now()"
        " FROM executions, generate_series(1, :count)"
        " WHERE execution_id = :like RETURNING execution_id",
        like=like,
        count=count,
    )
    return [r["execution_id"] for r in rows]


def log_messages(database: Database, execution_id: str) -> list[str]:
    rows = database.run(
        "SELECT message FROM execution_logs WHERE execution_id = :id ORDER BY logged_at, log_id",
        id=execution_id,
    )
    return [r["message"] for r in rows]


# -- each action ---------------------------------------------------------------------------


def test_a_bulk_retry_requeues_the_failed_executions_of_the_filter_like_single_retries(
    api: ApiClient, database: Database
) -> None:
    seeded = endpoint_with(database, 4, max_attempts=3)
    fail(database, seeded.execution_ids[:2], attempts=3, error_type="HTTP_ERROR")
    fail(database, seeded.execution_ids[2:3], attempts=3, error_type="TIMEOUT")

    body = bulk(api, "retry", endpoint=seeded.endpoint, status="FAILED", error_type="HTTP_ERROR")

    assert (body["action"], body["state"]) == ("retry", "DONE")  # one page: done at once
    assert (body["matched"], body["done"], body["refused"]) == (2, 2, 0)
    assert body["filter"]["status"] == ["FAILED"]
    assert statuses(database, seeded.execution_ids) == {"QUEUED": 3, "FAILED": 1}
    moved = execution(database, seeded.execution_ids[1])
    assert (moved["attempt_count"], moved["max_attempts"]) == (3, 6)  # a new budget of 3
    assert moved["completed_at"] is None
    assert log_messages(database, seeded.execution_ids[1])[-1] == (
        f"Execution requeued by bulk operation {body['operation_id']}. Attempts 4 to 6 allowed."
    )
    assert api.get(f"/operations/{body['operation_id']}").body == body


def test_a_bulk_retry_counts_every_execution_that_is_not_failed_as_refused(
    api: ApiClient, database: Database
) -> None:
    seeded = endpoint_with(database, 5)
    fail(database, seeded.execution_ids[:2])
    set_status(database, seeded.execution_ids[2:3], "SUCCESS")

    body = bulk(api, "retry", endpoint=seeded.endpoint)

    assert (body["state"], body["matched"], body["done"], body["refused"]) == ("DONE", 5, 2, 3)
    assert statuses(database, seeded.execution_ids) == {"QUEUED": 4, "SUCCESS": 1}


def test_a_bulk_cancel_cancels_only_what_has_not_ended(api: ApiClient, database: Database) -> None:
    seeded = endpoint_with(database, 6)
    fail(database, seeded.execution_ids[:1])
    set_status(database, seeded.execution_ids[1:2], "SUCCESS")
    set_status(database, seeded.execution_ids[2:3], "PENDING")
    set_status(database, seeded.execution_ids[3:4], "RETRYING")

    body = bulk(api, "cancel", endpoint=seeded.endpoint)

    assert (body["state"], body["matched"], body["done"], body["refused"]) == ("DONE", 6, 4, 2)
    assert statuses(database, seeded.execution_ids) == {
        "FAILED": 1,
        "SUCCESS": 1,
        "CANCELLED": 4,
    }
    assert log_messages(database, seeded.execution_ids[2])[-1] == (
        f"Execution cancelled by bulk operation {body['operation_id']}."
    )


def test_a_bulk_delete_removes_ended_executions_with_their_attempts_and_logs(
    api: ApiClient, database: Database
) -> None:
    kept, gone = endpoint_with(database, 3), endpoint_with(database, 2)
    fail(database, kept.execution_ids[:2])
    fail(database, gone.execution_ids)
    database.run(
        "INSERT INTO execution_logs (execution_id, attempt_number, level, message)"
        " SELECT id, 1, 'INFO', 'x' FROM unnest(CAST(:ids AS TEXT[])) AS id",
        ids=kept.execution_ids + gone.execution_ids,
    )

    first = bulk(api, "delete", endpoint=kept.endpoint)
    second = bulk(api, "delete", endpoint=gone.endpoint, status=["FAILED", "SUCCESS"])

    assert (first["matched"], first["done"], first["refused"]) == (3, 2, 1)  # one QUEUED
    assert (second["matched"], second["done"], second["refused"]) == (2, 2, 0)
    assert statuses(database, kept.execution_ids) == {"QUEUED": 1}
    assert statuses(database, gone.execution_ids) == {}
    doomed = kept.execution_ids[:2] + gone.execution_ids
    for table in ("attempts", "execution_logs"):
        left = database.run(
            f"SELECT count(*) AS n FROM {table} WHERE execution_id = ANY(CAST(:ids AS TEXT[]))",
            ids=doomed,
        )
        assert left[0]["n"] == 0, table
    # a one-shot job goes with its last execution; one with an execution left stays
    assert api.get(f"/jobs/{gone.job_id}").status == 404
    assert api.get(f"/jobs/{kept.job_id}").status == 200


def test_purging_an_endpoints_pending_work_is_a_cancel_of_its_waiting_statuses(
    api: ApiClient, database: Database
) -> None:
    seeded, other = endpoint_with(database, 5), endpoint_with(database, 2)
    set_status(database, seeded.execution_ids[:1], "PENDING")
    set_status(database, seeded.execution_ids[1:2], "RETRYING")
    set_status(database, seeded.execution_ids[2:3], "RUNNING")
    fail(database, seeded.execution_ids[3:4])

    body = bulk(api, "cancel", endpoint=seeded.endpoint, status=["PENDING", "QUEUED", "RETRYING"])

    assert (body["state"], body["matched"], body["done"], body["refused"]) == ("DONE", 3, 3, 0)
    assert statuses(database, seeded.execution_ids) == {
        "CANCELLED": 3,
        "RUNNING": 1,
        "FAILED": 1,
    }
    assert statuses(database, other.execution_ids) == {"QUEUED": 2}


# -- pages, the fixed set, abort -------------------------------------------------------------


def test_pages_work_through_a_set_fixed_when_the_action_was_created(
    small_pages: int, api: ApiClient, database: Database
) -> None:
    seeded = endpoint_with(database, 5)  # one INSERT: all five share a created_at
    fail(database, seeded.execution_ids)

    body = bulk(api, "retry", endpoint=seeded.endpoint, status="FAILED")
    assert (body["state"], body["matched"], body["done"]) == ("RUNNING", 2, 2)  # page one
    later = add_failed(database, seeded.execution_ids[0], 3)

    assert drain(database) == 2  # pages two and three
    assert progress(api, body["operation_id"]) == ("DONE", 5, 5, 0)
    assert statuses(database, seeded.execution_ids) == {"QUEUED": 5}
    assert statuses(database, later) == {"FAILED": 3}  # created afterwards: untouched
    for execution_id in seeded.execution_ids:  # each requeued once
        requeued = [m for m in log_messages(database, execution_id) if "requeued" in m]
        assert len(requeued) == 1, execution_id


def test_an_abort_stops_an_operation_between_pages(
    small_pages: int, api: ApiClient, database: Database
) -> None:
    seeded = endpoint_with(database, 5)
    body = bulk(api, "cancel", endpoint=seeded.endpoint)
    operation_id = body["operation_id"]

    aborted = api.post(f"/operations/{operation_id}/abort")

    assert aborted.status == 200, aborted.body
    assert (aborted.body["state"], aborted.body["done"]) == ("ABORTED", 2)
    assert aborted.body["ended_at"] is not None
    assert drain(database) == 0
    assert statuses(database, seeded.execution_ids) == {"CANCELLED": 2, "QUEUED": 3}
    again = api.post(f"/operations/{operation_id}/abort")  # aborting again: as it is
    assert (again.status, again.body) == (200, aborted.body)


def test_an_ended_operation_cannot_be_aborted_and_an_unknown_one_is_404(
    api: ApiClient, database: Database
) -> None:
    seeded = endpoint_with(database, 1)
    done = bulk(api, "cancel", endpoint=seeded.endpoint)
    assert done["state"] == "DONE"

    refused = api.post(f"/operations/{done['operation_id']}/abort")

    assert (refused.status, refused.error_code) == (409, "OPERATION_NOT_RUNNING")
    assert "is DONE: only a RUNNING operation can be aborted" in refused.body["error"]["message"]
    for reply in (api.get("/operations/op_nope"), api.post("/operations/op_nope/abort")):
        assert (reply.status, reply.error_code) == (404, "OPERATION_NOT_FOUND")


def test_two_schedulers_on_one_operation_act_on_each_execution_once(
    small_pages: int, api: ApiClient, database: Database
) -> None:
    seeded = endpoint_with(database, 21)
    fail(database, seeded.execution_ids)
    body = bulk(api, "retry", endpoint=seeded.endpoint, status="FAILED")
    errors: list[BaseException] = []

    def scheduler() -> None:
        try:
            drain(database)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=scheduler) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert not errors
    assert progress(api, body["operation_id"]) == ("DONE", 21, 21, 0)
    logged = database.run(
        "SELECT count(*) AS n FROM execution_logs WHERE message LIKE 'Execution requeued%'"
        " AND execution_id = ANY(CAST(:ids AS TEXT[]))",
        ids=seeded.execution_ids,
    )
    assert logged[0]["n"] == 21


def test_several_running_operations_take_turns(
    small_pages: int, api: ApiClient, database: Database
) -> None:
    a, b = endpoint_with(database, 5), endpoint_with(database, 5)
    first = bulk(api, "cancel", endpoint=a.endpoint)
    second = bulk(api, "cancel", endpoint=b.endpoint)
    operator = BulkOperator(OperationService(database, page_size=PAGE))

    operator.run_once()
    operator.run_once()

    assert progress(api, first["operation_id"])[2] == 4
    assert progress(api, second["operation_id"])[2] == 4


# -- refusals of the request -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"action": "retry", "filter": {}}, 'give filter fields, or "all": true'),
        ({"action": "retry"}, 'give filter fields, or "all": true'),
        ({"action": "purge", "filter": {"endpoint": "e"}}, "'action' must be one of"),
        ({"action": "retry", "filter": {"endpoint": "e"}, "dry": 1}, "Unknown field(s)"),
        ({"action": "retry", "filter": {"name": "e"}}, "Unknown field(s) for a bulk filter"),
        ({"action": "retry", "filter": {"status": "DEAD"}}, "filter.status must be one of"),
        ({"action": "delete", "filter": {"endpoint": "e"}, "all": True}, "takes an empty"),
    ],
)
def test_every_bad_bulk_request_is_a_400_with_the_envelope(
    api: ApiClient, database: Database, body: dict[str, Any], fragment: str
) -> None:
    assert_invalid(api.post("/executions/bulk", body), fragment)
    assert database.run("SELECT count(*) AS n FROM bulk_operations")[0]["n"] == 0


def test_all_true_with_an_empty_filter_acts_on_every_execution(
    api: ApiClient, database: Database
) -> None:
    a, b = endpoint_with(database, 2), endpoint_with(database, 1)
    reply = api.post("/executions/bulk", {"action": "cancel", "filter": {}, "all": True})
    assert reply.status == 202, reply.body
    assert (reply.body["matched"], reply.body["done"]) == (3, 3)
    assert statuses(database, a.execution_ids + b.execution_ids) == {"CANCELLED": 3}
