"""chalicelib/db/shapes.py: a statement cut to the filters given, one shape per set."""

from __future__ import annotations

from chalicelib.db.queries import Query, load_queries
from chalicelib.db.shapes import shaped, tags

LISTING = Query(
    name="listing",
    source="test.sql",
    sql="SELECT a FROM t\n"
    "WHERE t.kind = 'x'\n"
    "  AND t.b = :b          -- if b\n"
    "  AND (t.c, t.id) < (:after_ts, :after_id)   -- if after_ts\n"
    "ORDER BY t.c DESC\n"
    "LIMIT :limit",
)


def test_a_line_stays_only_when_its_parameter_is_given() -> None:
    query, params = shaped(LISTING, {"b": None, "after_ts": "t", "after_id": "i", "limit": 5})
    assert ":b" not in query.sql and "-- if" not in query.sql
    assert "AND (t.c, t.id) < (:after_ts, :after_id)\n" in query.sql
    assert params == {"after_ts": "t", "after_id": "i", "limit": 5}  # b is dropped with it
    assert query.name == "listing[after_ts]"


def test_no_filter_is_the_untagged_lines_and_every_filter_is_the_statement_as_written() -> None:
    bare, params = shaped(LISTING, {"b": None, "after_ts": None, "after_id": None, "limit": 5})
    assert bare.sql.splitlines() == [
        "SELECT a FROM t",
        "WHERE t.kind = 'x'",
        "ORDER BY t.c DESC",
        "LIMIT :limit",
    ]
    assert params == {"limit": 5}
    full, _ = shaped(LISTING, {"b": 1, "after_ts": "t", "after_id": "i", "limit": 5})
    assert [line.split("--")[0].rstrip() for line in LISTING.sql.splitlines()] == [
        line.rstrip() for line in full.sql.splitlines()
    ]


def test_the_same_shape_is_the_same_text() -> None:
    """One prepared statement per shape and connection, however many values it is run with."""
    one, _ = shaped(LISTING, {"b": 1, "after_ts": None, "limit": 5})
    two, _ = shaped(LISTING, {"b": 2, "after_ts": None, "limit": 50})
    assert one is two


def test_the_listings_are_tagged() -> None:
    assert tags(load_queries()["jobs_list"]) == {
        "endpoint",
        "trigger_type",
        "cron",
        "retired",
        "after_ts",
    }
    assert tags(load_queries()["dead_letters_list"]) == {
        "endpoint",
        "since",
        "until",
        "error_type",
        "after_ts",
    }
    assert tags(load_queries()["executions_list_for_job"]) == {"status", "after_ts"}
