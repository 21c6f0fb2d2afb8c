"""chalicelib/db/shapes.py: a statement cut to the filters given, one shape per set."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from chalicelib.db.queries import Query, load_queries
from chalicelib.db.shapes import sent_shapes, shaped, tags

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


RULED = Query(
    name="ruled",
    source="test.sql",
    sql="-- A listing.\n"
    "-- shape: endpoint always\n"
    "-- shape: cron or kind\n"
    "SELECT a FROM t\n"
    "WHERE t.endpoint = :endpoint  -- if endpoint\n"
    "  AND t.cron                  -- if cron\n"
    "  AND t.kind = :kind          -- if kind\n",
)


def test_the_shapes_sent_are_the_ones_the_rules_allow() -> None:
    assert sent_shapes(RULED) == (
        frozenset({"endpoint"}),
        frozenset({"endpoint", "cron"}),
        frozenset({"endpoint", "kind"}),
    )
    assert len(sent_shapes(LISTING)) == 4  # no rule: every filter optional, independent


def test_a_shape_the_rules_do_not_allow_is_refused() -> None:
    with pytest.raises(ValueError) as refused:
        shaped(RULED, {"endpoint": "e", "cron": True, "kind": "k"})
    assert str(refused.value) == (
        "query 'ruled' cut with cron, endpoint, kind given, a shape its '-- shape:' rules do "
        "not allow (docs/reference/sql/ writes out the ones they do)"
    )
    with pytest.raises(ValueError, match="cut with none given"):
        shaped(RULED, {"endpoint": None})


def test_a_rule_must_name_a_tag() -> None:
    query = Query(name="odd", source="t.sql", sql="-- shape: nope always\nSELECT 1 -- if yes\n")
    with pytest.raises(ValueError, match=re.escape("a shape rule names ['nope'], not a tag")):
        sent_shapes(query)


def test_every_statement_s_rules_name_its_tags_and_allow_a_shape() -> None:
    registry = load_queries()
    for name in registry.names():
        assert sent_shapes(registry[name]), name


def test_the_generated_shapes_keep_no_tag() -> None:
    """docs/reference/sql/ writes each shape cut: no line ends in an '-- if' tag."""
    root = Path(__file__).resolve().parents[2] / "docs" / "reference" / "sql"
    tagged = [
        str(path)
        for path in sorted(root.rglob("*.sql"))
        if re.search(r"--\s*if\s+[a-z_]+\s*$", path.read_text(encoding="utf-8"), re.MULTILINE)
    ]
    assert tagged == []
