"""The FAILING rule's read (auto_pause_watch_page) is bounded by its page of endpoints: read
as data in both plan modes (tests/support/plans.py) over many endpoints with many
delivery summary rows each, it reads a page's worth of them, never the table."""

from __future__ import annotations

from datetime import UTC, datetime

from chalicelib.db.connection import Database
from chalicelib.db.queries import queries
from chalicelib.services.auto_pause import FailingWatch
from tests.support.plans import bounded

ENDPOINTS = 400
PAGE = 20


def _history(database: Database) -> None:
    """ENDPOINTS endpoints, each with totals by outcome and error type, and two writers'
    minute rows of the last three minutes (what a busy deployment holds)."""
    database.run(
        "INSERT INTO endpoints (name, endpoint_type, spec, retry_policy) "
        "SELECT 'ep-' || lpad(CAST(i AS TEXT), 4, '0'), 'HTTP', CAST('{}' AS JSONB), "
        "CAST('{}' AS JSONB) FROM generate_series(1, :n) AS i",
        n=ENDPOINTS,
    )
    columns = (
        "grain, bucket_start, endpoint, outcome, error_type, writer, attempts, ended, "
        "duration_ms, le_10, le_50, le_100, le_250, le_500, le_1000, le_5000, le_30000"
    )
    database.run(
        f"INSERT INTO delivery_counts ({columns}) "
        "SELECT 'total', CAST('1970-01-01T00:00:00Z' AS TIMESTAMPTZ), e.name, o.outcome, "
        "t.error_type, 'fold', 10, 5, 100, 1, 1, 1, 1, 1, 1, 1, 1 "
        "FROM endpoints AS e "
        "CROSS JOIN (VALUES ('SUCCESS'), ('FAILED')) AS o (outcome) "
        "CROSS JOIN (VALUES (''), ('HTTP_ERROR'), ('TIMEOUT')) AS t (error_type)"
    )
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    database.run(
        f"INSERT INTO delivery_counts ({columns}) "
        "SELECT 'minute', CAST(:now AS TIMESTAMPTZ) - m * INTERVAL '1 minute', e.name, "
        "'FAILED', 'HTTP_ERROR', w.writer, 1, 1, 10, 1, 1, 1, 1, 1, 1, 1, 1 "
        "FROM endpoints AS e CROSS JOIN generate_series(0, 2) AS m "
        "CROSS JOIN (VALUES ('w1/t0'), ('w2/t0')) AS w (writer)",
        now=now,
    )
    # One pass of the rule over them all: each has its memory row, as after a sweep.
    FailingWatch(database, operator_endpoint=None, batch_size=ENDPOINTS).run(now)
    for table in ("endpoints", "delivery_counts", "endpoint_failing"):
        database.run(f"ANALYZE {table}")


def test_a_watch_page_reads_its_endpoints_not_every_endpoint_or_summary_row(
    database: Database,
) -> None:
    _history(database)
    params = {"after": "ep-0100", "batch": PAGE}
    [page] = [database.run(queries["auto_pause_watch_page"].sql, **params)]
    assert [r["endpoint"] for r in page] == [f"ep-{i:04d}" for i in range(101, 101 + PAGE)]
    # The rolled-up totals: the minute rows are counted once the housekeeper rolls them up.
    assert {(r["succeeded"], r["failed"]) for r in page} == {(30, 30)}

    # A page of endpoints and their totals (6 each), with room for a range's edges; never
    # the 400 endpoints' 4,800 summary rows.
    bounded(
        database,
        queries["auto_pause_watch_page"],
        params,
        at_most=PAGE * 6 + 30,
        tables=("endpoints", "delivery_counts", "endpoint_failing"),
    )
