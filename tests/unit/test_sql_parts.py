"""chalicelib/db/queries.py: a part is one CTE named as the part, and a file includes its
own parts and the shared file's only; each refusal is at load time and says why."""

from __future__ import annotations

import re

import pytest

from chalicelib.db.queries import (
    SHARED_PARTS,
    SQL_DIR,
    check_part,
    expand_files,
    is_one_cte,
    parse_sql_file,
)

A_STATEMENT = (
    "-- name: things_get\n-- Reads a thing.\nWITH\n-- include: thing\nSELECT * FROM thing\n"
)


def _files(**texts: str) -> dict[str, object]:
    return {f"{name}.sql": parse_sql_file(text, f"{name}.sql") for name, text in texts.items()}


@pytest.mark.parametrize(
    "body",
    [
        "SELECT 1",  # a bare SELECT
        "name, endpoint_type, spec",  # a column list
        "thing AS (SELECT 1), other AS (SELECT 2)",  # two CTEs
        "other AS (SELECT 1)",  # a CTE named otherwise
        "thing AS (SELECT 1) FOR UPDATE",  # something after it
        "thing AS (SELECT (1)",  # never closed
        "  AND e.endpoint = :endpoint",  # a fragment of a WHERE clause
    ],
)
def test_a_part_that_is_not_one_cte_named_as_it_is_refused(body: str) -> None:
    text = f"-- part: thing\n-- Why it is so.\n{body}\n"
    with pytest.raises(ValueError) as refused:
        parse_sql_file(text, "things.sql")
    assert str(refused.value) == (
        "things.sql: part 'thing' must be one CTE, 'thing AS (...)' and nothing after it "
        "(the statement that includes it writes WITH and the commas around it)"
    )


@pytest.mark.parametrize(
    "body",
    [
        "thing AS (SELECT 1)",
        "thing AS MATERIALIZED (\n    SELECT ')' AS p -- a ) in a comment\n)",
        "thing AS NOT MATERIALIZED (SELECT 1)  -- why",
    ],
)
def test_a_part_that_is_one_cte_is_accepted(body: str) -> None:
    assert check_part("thing", body, "things.sql") == body


def test_an_include_after_a_comma_keeps_the_comma() -> None:
    text = (
        "-- part: one\none AS (SELECT 1)\n\n-- part: two\ntwo AS (SELECT 2)\n\n"
        "-- name: things_all\nWITH\n-- include: one\n, -- include: two\nSELECT * FROM one, two\n"
    )
    (query,) = expand_files(_files(things=text))  # type: ignore[arg-type]
    assert query.sql == "WITH\none AS (SELECT 1)\n, two AS (SELECT 2)\nSELECT * FROM one, two"


def test_an_include_of_another_files_part_is_refused() -> None:
    files = _files(things=A_STATEMENT, others="-- part: thing\nthing AS (SELECT 1)\n")
    with pytest.raises(ValueError) as refused:
        expand_files(files)  # type: ignore[arg-type]
    assert str(refused.value) == (
        "things.sql includes part 'thing' of others.sql: a file includes its own parts and "
        f"those of {SHARED_PARTS} only"
    )


def test_an_include_of_a_shared_part_is_accepted() -> None:
    files = _files(things=A_STATEMENT, parts="-- part: thing\nthing AS (SELECT 1)\n")
    (query,) = expand_files(files)  # type: ignore[arg-type]
    assert query.sql.endswith("WITH\nthing AS (SELECT 1)\nSELECT * FROM thing")


def test_the_shared_file_holds_no_statement_and_shadows_no_part() -> None:
    with pytest.raises(
        ValueError, match=re.escape(f"{SHARED_PARTS} holds parts only, not 'things_get'")
    ):
        expand_files(_files(parts=A_STATEMENT))  # type: ignore[arg-type]
    twice = _files(
        things=A_STATEMENT + "\n-- part: thing\nthing AS (SELECT 2)\n",
        parts="-- part: thing\nthing AS (SELECT 1)\n",
    )
    with pytest.raises(
        ValueError, match=re.escape(f"things.sql: part 'thing' is defined in {SHARED_PARTS}")
    ):
        expand_files(twice)  # type: ignore[arg-type]


def test_parts_of_two_files_may_share_a_name() -> None:
    one = A_STATEMENT + "\n-- part: thing\nthing AS (SELECT 1)\n"
    two = one.replace("things_get", "others_get").replace("SELECT 1", "SELECT 2")
    got = {q.name: q.sql for q in expand_files(_files(things=one, others=two))}  # type: ignore[arg-type]
    assert "thing AS (SELECT 1)" in got["things_get"]
    assert "thing AS (SELECT 2)" in got["others_get"]


def test_every_part_of_the_sql_files_is_one_cte_named_as_it() -> None:
    """No part is let through unshaped: each one the service loads reads as one CTE."""
    parts = {
        name: body
        for path in sorted(SQL_DIR.glob("*.sql"))
        for name, body in parse_sql_file(path.read_text(encoding="utf-8"), path.name).parts.items()
    }
    assert parts
    assert [name for name, body in sorted(parts.items()) if not is_one_cte(name, body)] == []


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("operations_columns", "    operation_id, action, state"),  # a column list
        ("executions_cancel_set", "    UPDATE executions SET status = 'CANCELLED'"),
        ("metrics_oldest_parked", "    SELECT x.run_at FROM executions AS x LIMIT 1"),
    ],
)
def test_no_part_name_is_exempt_from_being_one_cte(name: str, body: str) -> None:
    """Names once let through unshaped are refused as any other (no exemption list)."""
    with pytest.raises(ValueError, match=re.escape(f"part {name!r} must be one CTE")):
        parse_sql_file(f"-- part: {name}\n{body}\n", "things.sql")


def test_a_part_defined_twice_in_one_file_is_refused() -> None:
    text = "-- part: thing\nthing AS (SELECT 1)\n\n-- part: thing\nthing AS (SELECT 2)\n"
    with pytest.raises(ValueError, match=re.escape("things.sql: part 'thing' is defined twice")):
        parse_sql_file(text, "things.sql")
