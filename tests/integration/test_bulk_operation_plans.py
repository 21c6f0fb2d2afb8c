"""A bulk operation's page is bounded by the page, never by the history or by the set:
plans read as data (the custom and the generic plan of each prepared statement, rows read
per table) for the page read, each page action and the loop's pick."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chalicelib.db.connection import Database
from chalicelib.db.queries import Query, queries
from chalicelib.domain.operations import BulkFilter
from chalicelib.domain.pagination import PageRequest
from chalicelib.domain.statuses import ExecutionStatus, requeue_sources, sources_of
from chalicelib.services.dead_letters import filtered_query, list_query
from tests.support.plans import bounded
from tests.support.seed.dead_letters import T0, endpoint_with, fail
from tests.support.seed.worker import Seeded

PAGE = 50
#: The operation's creation: after everything seeded (T0 and the history before it).
CREATED = T0 + timedelta(days=1)


@pytest.fixture
def history(database: Database) -> Seeded:
    """300 dead letters of one endpoint among 10,000 executions of history (SUCCESS, FAILED
    and CANCELLED of 20 other endpoints) and 5,000 jobs, and 2,000 ended operations."""
    seeded = endpoint_with(database, 300)
    fail(database, seeded.execution_ids, created_at=T0, attempts=1)
    jobs = [endpoint_with(database, 1).job_id for _ in range(20)]
    database.run(  # the jobs of that history
        "INSERT INTO jobs (endpoint, endpoint_type, trigger_type, endpoint_snapshot)"
        " SELECT :e, 'HTTP', 'IMMEDIATE', '{}' FROM generate_series(1, 5000)",
        e=seeded.endpoint,
    )
    database.run(
        "INSERT INTO executions (job_id, endpoint, endpoint_type, status, last_error_type,"
        " completed_at, created_at)"
        " SELECT (CAST(:jobs AS TEXT[]))[g % 20 + 1], 'history-' || CAST(g % 20 AS TEXT), 'HTTP',"
        " (ARRAY['SUCCESS', 'FAILED', 'CANCELLED'])[g % 3 + 1],"
        " CASE WHEN g % 3 = 1 THEN 'TIMEOUT' END, now(),"
        " CAST(:t0 AS TIMESTAMPTZ) - g * INTERVAL '1 second'"
        " FROM generate_series(1, 10000) AS g",
        jobs=jobs,
        t0=T0,
    )
    database.run(
        "INSERT INTO bulk_operations (action, filter, state, ended_at)"
        " SELECT 'retry', '{}', 'DONE', now() FROM generate_series(1, 2000)"
    )
    for table in ("executions", "attempts", "jobs"):
        database.run(f"ANALYZE {table}")
    database.run("ANALYZE bulk_operations")
    return seeded


def page_read(
    bulk_filter: BulkFilter, after: tuple[datetime, str] | None
) -> tuple[Query, dict[str, Any]]:
    request = PageRequest(PAGE, *(after or (None, None)))
    return list_query(bulk_filter.execution_filter(CREATED), request)


def cursor_of(database: Database, seeded: Seeded, skip: int) -> tuple[datetime, str]:
    """The cursor after ``skip`` of the endpoint's executions, newest first."""
    row = database.run(
        "SELECT created_at, execution_id FROM executions WHERE endpoint = :e"
        " ORDER BY created_at DESC, execution_id DESC OFFSET :skip LIMIT 1",
        e=seeded.endpoint,
        skip=skip,
    )[0]
    return row["created_at"], row["execution_id"]


@pytest.mark.parametrize(
    "bulk_filter",
    [
        BulkFilter(statuses=("FAILED",)),
        BulkFilter(statuses=("FAILED",), error_type="HTTP_ERROR"),
        BulkFilter(statuses=("PENDING", "QUEUED", "RETRYING")),
        BulkFilter(),  # "all": true
        BulkFilter(created_after=T0 - timedelta(hours=1), created_before=T0 + timedelta(hours=1)),
    ],
    ids=["failed", "error_type", "waiting", "all", "time_range"],
)
def test_a_page_deep_in_the_set_reads_a_few_pages(
    database: Database, history: Seeded, bulk_filter: BulkFilter
) -> None:
    after = cursor_of(database, history, 150)
    query, params = page_read(bulk_filter, after)
    # every status branch is cut at a page: seven statuses, a page (+1) each at most
    bounded(database, query, params, at_most=7 * (PAGE + 1), tables=("executions", "attempts"))


@pytest.mark.parametrize(
    "bulk_filter",
    [
        BulkFilter(statuses=("FAILED",)),
        BulkFilter(statuses=("FAILED",), error_type="TIMEOUT"),
        BulkFilter(),  # "all": true
        BulkFilter(created_after=T0 - timedelta(hours=2), created_before=T0),
        BulkFilter(statuses=("FAILED", "CANCELLED"), endpoint="history-1"),
    ],
    ids=["failed", "error_type", "all", "time_range", "endpoint"],
)
def test_a_count_reads_at_most_its_limit_whatever_the_history(
    database: Database, history: Seeded, bulk_filter: BulkFilter
) -> None:
    # thousands match each filter: the count reads its limit (+1) per status branch
    query, params = filtered_query(
        "operations_count", bulk_filter.execution_filter(), PageRequest(PAGE)
    )
    bounded(database, query, params, at_most=7 * (PAGE + 1), tables=("executions", "attempts"))
    assert database.run(query, **params)[0]["matched"] == PAGE + 1  # "more than PAGE"


@pytest.mark.parametrize("status", ["FAILED", None])
def test_a_page_of_one_endpoints_dead_letters_reads_its_range(
    database: Database, history: Seeded, status: str | None
) -> None:
    statuses = ("FAILED",) if status else ("PENDING", "QUEUED", "RETRYING", "FAILED")
    bulk_filter = BulkFilter(endpoint=history.endpoint, statuses=statuses)
    query, params = page_read(bulk_filter, cursor_of(database, history, 150))
    bounded(database, query, params, at_most=3 * (PAGE + 1), tables=("executions", "attempts"))


def test_each_page_action_reads_its_page(database: Database, history: Seeded) -> None:
    ids = history.execution_ids[:PAGE]
    bounded(
        database,
        queries["operations_retry_page"],
        {"ids": ids, "sources": requeue_sources(), "endpoint_version": "snapshot", "message": "m"},
        at_most=3 * PAGE,
        tables=("executions", "jobs"),
    )
    bounded(
        database,
        queries["operations_cancel_page"],
        {"ids": ids, "sources": sources_of(ExecutionStatus.CANCELLED), "message": "m"},
        at_most=3 * PAGE,
    )
    # one-shot jobs, as most are: their execution and the job go together
    one_shots = [endpoint_with(database, 1).execution_id for _ in range(PAGE)]
    fail(database, one_shots, attempts=1)
    database.run(
        "INSERT INTO attempts (execution_id, attempt_number, status, started_at)"
        " SELECT execution_id, 1, 'SUCCESS', now() FROM executions WHERE status = 'SUCCESS'"
    )
    for table in ("executions", "attempts", "jobs"):
        database.run(f"ANALYZE {table}")
    bounded(
        database,
        queries["operations_delete_page"],
        {"ids": one_shots},
        at_most=5 * PAGE,  # each execution: read, deleted, and its job probed
        tables=("executions", "attempts", "execution_logs", "jobs"),
    )


def test_the_loops_pick_reads_the_running_operations_only(
    database: Database, history: Seeded
) -> None:
    database.run(
        "INSERT INTO bulk_operations (action, filter, advanced_at) VALUES ('retry', '{}', :at)",
        at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    bounded(
        database, queries["operations_next_running"], {}, at_most=1, tables=("bulk_operations",)
    )


@pytest.mark.parametrize("days_ago", [1, -1], ids=["none_expired", "all_expired"])
def test_the_retention_purge_reads_its_batch_of_ended_operations(
    database: Database, history: Seeded, days_ago: int
) -> None:
    """2,000 ended operations and 2,000 RUNNING ones: a batch reads its own rows of the
    ended ones (none when none expired), never the RUNNING ones."""
    database.run(
        "INSERT INTO bulk_operations (action, filter, advanced_at)"
        " SELECT 'retry', '{}', now() - g * INTERVAL '1 day' FROM generate_series(1, 2000) AS g"
    )
    database.run("ANALYZE bulk_operations")
    cutoff = datetime.now(UTC) - timedelta(days=days_ago)
    bounded(
        database,
        queries["housekeeping_purge_operations"],
        {"cutoff": cutoff, "batch": PAGE},
        at_most=3 * PAGE,  # each row read on the index, found again by id, deleted
        tables=("bulk_operations",),
    )
