"""``te executions bulk``, ``te operations`` and the SDK's bulk actions against the real
local stack, with the scheduler's bulk loop running beside it where a test waits."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from chalicelib.db.connection import Database
from chalicelib.scheduler.bulk import BulkOperator
from chalicelib.services.operations import OperationService
from te.client import Client, Conflict
from tests.support.cli import Te
from tests.support.seed.dead_letters import fail
from tests.support.seed.worker import http_spec, seed, statuses

PAGE = 2


@pytest.fixture
def small_pages(app_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TE_BULK_PAGE_SIZE", str(PAGE))


@pytest.fixture
def bulk_loop(database: Database) -> Iterator[None]:
    """The scheduler's bulk loop, a pass every 50 ms, until the test ends."""
    gate = threading.Event()
    gate.set()
    for _ in _bulk_loop(database, gate):
        yield


@pytest.fixture
def gated_bulk_loop(database: Database) -> Iterator[threading.Event]:
    """The bulk loop as :func:`bulk_loop`, starting only once the test sets the event it
    gets: what happens before the operation's first page is then up to the test, not to
    how fast the machine is."""
    yield from _bulk_loop(database, threading.Event())


def _bulk_loop(database: Database, gate: threading.Event) -> Iterator[threading.Event]:
    operator = BulkOperator(OperationService(database, page_size=PAGE))
    stop = threading.Event()

    def run() -> None:
        while not (gate.wait(0.05) or stop.is_set()):
            pass
        while not stop.is_set():
            if not operator.run_once().more:
                stop.wait(0.05)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield gate
    gate.set()
    stop.set()
    thread.join(timeout=10)


def pending(database: Database, count: int) -> Any:
    """An endpoint with ``count`` PENDING executions (no loop of the stack promotes them)."""
    return seed(
        database, spec=http_spec("http://127.0.0.1:9/unused"), count=count, status="PENDING"
    )


def test_bulk_retry_with_wait_prints_progress_until_done(
    small_pages: None, te: Te, database: Database, bulk_loop: None
) -> None:
    seeded = pending(database, 6)  # not QUEUED: the stack's worker would claim them
    fail(database, seeded.execution_ids[:5], error_type="HTTP_ERROR")
    fail(database, seeded.execution_ids[5:], error_type="TIMEOUT")

    result = te.ok(
        "executions", "bulk", "retry", "--endpoint", seeded.endpoint, "--status", "FAILED",
        "--error-type", "HTTP_ERROR", "--wait", "--interval", "0.1", "--json",
    )  # fmt: skip

    operation = json.loads(result.stdout)
    assert (operation["state"], operation["matched"], operation["done"]) == ("DONE", 5, 5)
    assert "RUNNING: matched 2, done 2, refused 0" in result.stderr
    assert "DONE: matched 5, done 5, refused 0" in result.stderr
    assert statuses(database, seeded.execution_ids[5:]) == {"FAILED": 1}


def test_purge_an_endpoints_pending_work_then_get_and_abort_the_operation(
    small_pages: None, te: Te, database: Database
) -> None:
    seeded = pending(database, 5)

    operation = te.json(
        "executions", "bulk", "cancel", "--endpoint", seeded.endpoint,
        "--status", "PENDING", "--status", "QUEUED", "--status", "RETRYING",
    )  # fmt: skip

    assert (operation["state"], operation["done"]) == ("RUNNING", 2)
    assert operation["filter"]["status"] == ["PENDING", "QUEUED", "RETRYING"]
    operation_id = operation["operation_id"]
    assert te.json("operations", "get", operation_id)["done"] == 2
    aborted = te.json("operations", "abort", operation_id)
    assert aborted["state"] == "ABORTED"
    assert statuses(database, seeded.execution_ids) == {"CANCELLED": 2, "PENDING": 3}
    waited = te("operations", "get", operation_id, "--wait")
    assert waited.exit_code == 3  # ended, but not DONE
    refused = te("executions", "bulk", "delete")
    assert refused.exit_code == 1 and "INVALID_REQUEST" in refused.stderr


def test_sdk_bulk_delete_waits_with_progress_and_an_ended_operation_is_not_aborted(
    small_pages: None, te: Te, database: Database, gated_bulk_loop: threading.Event
) -> None:
    seeded = pending(database, 5)
    fail(database, seeded.execution_ids)
    client = Client(te.url, te.key)
    seen: list[tuple[str, int]] = []

    def progress(op: dict[str, Any]) -> None:
        seen.append((op["state"], op["done"]))
        gated_bulk_loop.set()  # the loop starts once the wait has seen the operation

    started = client.executions.bulk("delete", endpoint=seeded.endpoint, status=["FAILED"])
    ended = client.operations.wait(
        started["operation_id"], timeout=30, interval=0.05, progress=progress
    )

    assert (ended["state"], ended["matched"], ended["done"], ended["refused"]) == (
        "DONE",
        5,
        5,
        0,
    )
    assert seen[-1] == ("DONE", 5) and seen[0][0] == "RUNNING"
    assert statuses(database, seeded.execution_ids) == {}
    with pytest.raises(Conflict) as refused:
        client.operations.abort(started["operation_id"])
    assert refused.value.code == "OPERATION_NOT_RUNNING"
    everything = client.executions.bulk("cancel", all=True)
    assert everything["action"] == "cancel"


def test_count_before_acting_from_the_cli_and_the_sdk_changes_nothing(
    te: Te, database: Database
) -> None:
    seeded = pending(database, 4)
    fail(database, seeded.execution_ids[:3], error_type="HTTP_ERROR")

    counted = te.json(
        "executions", "bulk", "count", "--endpoint", seeded.endpoint, "--status", "FAILED"
    )

    assert counted == {"matched": 3, "more": False, "limit": 1000}
    client = Client(te.url, te.key)
    assert client.executions.bulk_count(endpoint=seeded.endpoint, error_type="HTTP_ERROR") == {
        "matched": 3,
        "more": False,
        "limit": 1000,
    }
    assert client.executions.bulk_count(all=True)["matched"] == 4
    assert statuses(database, seeded.execution_ids) == {"FAILED": 3, "PENDING": 1}
    assert database.run("SELECT count(*) AS n FROM bulk_operations")[0]["n"] == 0
    waited = te("executions", "bulk", "count", "--all", "--wait")
    assert waited.exit_code == 2 and "count creates none" in waited.stderr
    empty = te("executions", "bulk", "count")
    assert empty.exit_code == 1 and "INVALID_REQUEST" in empty.stderr
