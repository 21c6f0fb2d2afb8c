"""Every named statement that carries the region marker is valid SQL as written.

The marker (``/*region_filter*/ TRUE``) used to have a second syntax, ``{region_filter}``,
which PostgreSQL refused until code replaced it; now a statement runs unchanged while the
filter is inactive, and an active filter's condition parses in the same place.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from chalicelib.db.connection import Database
from chalicelib.db.queries import REGION_MARKER, load_queries, regional
from chalicelib.domain.regions import RegionFilter

NOW = datetime(2026, 3, 15, 10, 0, tzinfo=UTC)
#: A value for every parameter the marked statements take (EXPLAIN does not run them).
PARAMS: dict[str, object] = {
    "now": NOW,
    "cutoff": NOW,
    "horizon": NOW,
    "batch": 10,
    "full": [],
    "busy": "{}",
    "pending": 0,
    "default_cap": 10,
    "worker_id": "w",
    "lease_ms": 1000,
    "timeout_sec": "300",
    "from_statuses": ["PENDING"],
    "message": "m",
    "results": "[]",
    "writer": "w/t",
}
MARKED = [n for n in load_queries().names() if REGION_MARKER in load_queries()[n].sql]


@pytest.mark.parametrize("name", MARKED)
def test_marked_statement_is_valid_sql_as_written_and_filtered(
    database: Database, name: str
) -> None:
    sql = load_queries()[name].sql
    params = {k: v for k, v in PARAMS.items() if f":{k}" in sql}
    assert database.run("EXPLAIN " + sql, **params)
    filtered, extra = regional(load_queries()[name], RegionFilter(("default",)))
    assert database.run("EXPLAIN " + filtered, **params, **extra)
