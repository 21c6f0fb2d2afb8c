"""The dead-letter statements read migration 007's and 014's indexes, never the history:
plans read as data (EXPLAIN ANALYZE (FORMAT JSON), the custom and the generic plan of the
prepared statement) over 20,000 executions of history."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from chalicelib.db.connection import Database
from chalicelib.db.queries import queries
from chalicelib.db.shapes import shaped
from chalicelib.domain.dead_letters import ExecutionFilter
from chalicelib.domain.pagination import PageRequest
from chalicelib.domain.statuses import ExecutionStatus
from chalicelib.services import dead_letters
from tests.support.plans import MODES, analyze, nodes
from tests.support.seed.dead_letters import T0, endpoint_with, fail
from tests.support.seed.worker import Seeded


@pytest.fixture
def history(database: Database) -> Seeded:
    """50 dead letters of one endpoint among 5,000 of another and 20,000 executions of
    history (SUCCESS) spread over 40 more endpoints: the shape of a real table, where one
    endpoint is a small part of the dead letters and the dead letters of the history."""
    seeded = endpoint_with(database, 50)
    fail(database, seeded.execution_ids, created_at=T0)
    other = endpoint_with(database, 5000)
    fail(database, other.execution_ids, created_at=T0 + timedelta(minutes=1), attempts=1)
    database.run(
        "INSERT INTO executions (job_id, endpoint, endpoint_type, status, created_at)"
        " SELECT :job, 'history-' || CAST(g % 40 AS TEXT), 'HTTP', 'SUCCESS',"
        " CAST(:t0 AS TIMESTAMPTZ) - g * INTERVAL '1 second'"
        " FROM generate_series(1, 20000) AS g",
        job=seeded.job_id,
        t0=T0,
    )
    database.run("ANALYZE executions")
    return seeded


def no_history_scan(database: Database, name: str, **params: Any) -> set[str]:
    """The indexes the statement ``name`` reads, cut to the shape of ``params`` as the
    service cuts it, after checking that neither its first (custom) plan nor its generic
    one reads a table of executions or attempts sequentially."""
    query, params = shaped(queries[name], params)
    used: set[str] = set()
    for mode in MODES:
        plan = analyze(database, query, params, mode)
        assert not plan.seq_scanned() & {"executions", "attempts"}, str(plan)
        used |= plan.indexes()
    return used


def list_params(**overrides: Any) -> dict[str, Any]:
    params: dict[str, Any] = {
        "statuses": ["FAILED"],
        "endpoint": None,
        "since": None,
        "until": None,
        "error_type": None,
        "after_ts": None,
        "after_id": None,
        "limit_plus_one": 51,
    }
    return {**params, **overrides}


@pytest.mark.parametrize("status", ["FAILED", "SUCCESS", "CANCELLED"])
def test_an_ended_status_is_read_in_order_on_its_partial_index(
    database: Database, history: Seeded, status: str
) -> None:
    used = no_history_scan(database, "dead_letters_list", **list_params(statuses=[status]))
    assert "idx_executions_ended" in used, used


def test_live_statuses_are_read_on_the_indexes_of_live_work(
    database: Database, history: Seeded
) -> None:
    live = {
        "PENDING": "idx_executions_waiting",
        "QUEUED": "idx_executions_waiting",
        "RETRYING": "idx_executions_waiting",
        "RUNNING": "idx_executions_running",
    }
    for status, index in live.items():
        used = no_history_scan(database, "dead_letters_list", **list_params(statuses=[status]))
        assert index in used, (status, used)


def test_every_status_at_once_reads_no_history_sequentially(
    database: Database, history: Seeded
) -> None:
    every = [s.value for s in ExecutionStatus]
    used = no_history_scan(database, "dead_letters_list", **list_params(statuses=every))
    assert "idx_executions_ended" in used, used


def test_the_dead_letters_of_one_endpoint_read_its_range_of_the_endpoint_index(
    database: Database, history: Seeded
) -> None:
    params = list_params(endpoint=history.endpoint, error_type="HTTP_ERROR")
    used = no_history_scan(database, "dead_letters_list_of_endpoint", **params)
    assert "idx_executions_by_endpoint" in used, used


def test_redrive_walks_the_partial_index_of_an_endpoints_dead_letters(
    database: Database, history: Seeded
) -> None:
    params = {
        "endpoint": history.endpoint,
        "since": T0 - timedelta(hours=1),
        "until": T0 + timedelta(hours=1),
        "error_type": "HTTP_ERROR",
    }
    batch = no_history_scan(
        database,
        "dead_letters_redrive_batch",
        **params,
        batch=500,
        sources=["FAILED"],
        endpoint_version="snapshot",
        message="m",
    )
    assert "idx_executions_by_endpoint" in batch, batch
    more = no_history_scan(database, "dead_letters_redrive_more", **params)
    assert "idx_executions_by_endpoint" in more, more


def test_an_error_type_never_reads_the_successes(database: Database, history: Seeded) -> None:
    """A SUCCESS execution has no last error: with an error type the 20,000 successes are
    not read for a match that cannot come (the service leaves SUCCESS out of the statuses,
    and its branch is off at once, in the generic plan as in the custom one)."""
    filters = ExecutionFilter(statuses=("SUCCESS",), error_type="TIMEOUT")
    query, params = dead_letters.list_query(filters, PageRequest(limit=50))
    for mode in MODES:
        plan = analyze(database, query, params, mode)
        read = sum(n.get("Actual Rows", 0) for n in nodes(plan.root) if "Index Name" in n)
        assert read == 0, str(plan)
