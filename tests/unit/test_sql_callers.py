"""Every named statement in ``chalicelib/db/sql`` has a caller in ``chalicelib``.

A statement nothing runs still costs: readers take it for a path the service has, and its
comments describe designs that are gone (``jobs_insert`` once said every creation went
through a ``jobs_insert_many`` that did not exist). Code names statements with string
literals (``queries["jobs_get"]``, or a name handed to a helper, as the housekeeper's
purges) or with an f-string inside ``queries[...]`` whose fixed parts frame the name
(``queries[f"catalogue_{kind}_get"]``), so a statement counts as called when a string literal
in ``chalicelib`` is its name, or such an f-string matches it. A statement another one
pulls in with ``-- include:`` counts as used too (parts must be included:
:func:`chalicelib.db.queries.expand_includes`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

from chalicelib.db.queries import SQL_DIR, parse_sql_file

ROOT = Path(__file__).resolve().parents[2]
_NAME = re.compile(r"[a-z_][a-z0-9_]*")
_INCLUDE = re.compile(r"^--\s*include:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


def statements(sql_files: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Named statements (not parts) by name -> the file defining them."""
    return {
        query.name: source
        for source, text in sql_files
        for query in parse_sql_file(text, source).queries
    }


def included(sql_files: Iterable[tuple[str, str]]) -> set[str]:
    return {name for _, text in sql_files for name in _INCLUDE.findall(text)}


def citations(sources: Iterable[str]) -> tuple[set[str], list[re.Pattern[str]]]:
    """The names Python sources can mean: exact string literals, and the f-strings that
    index ``queries`` as patterns (each ``{...}`` matching one name-like run)."""
    literals: set[str] = set()
    patterns: list[re.Pattern[str]] = []
    for source in sources:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if _NAME.fullmatch(node.value):
                    literals.add(node.value)
            elif _indexes_queries(node) and isinstance(node.slice, ast.JoinedStr):
                patterns.append(_pattern(node.slice))
    return literals, patterns


def _indexes_queries(node: ast.AST) -> bool:
    if not isinstance(node, ast.Subscript):
        return False
    value = node.value
    name = value.id if isinstance(value, ast.Name) else getattr(value, "attr", None)
    return name == "queries"


def _pattern(text: ast.JoinedStr) -> re.Pattern[str]:
    return re.compile(
        "".join(
            re.escape(part.value)
            if isinstance(part, ast.Constant) and isinstance(part.value, str)
            else "[a-z0-9_]+"
            for part in text.values
        )
    )


def uncalled(sql_files: list[tuple[str, str]], sources: list[str]) -> list[str]:
    """``file: name`` of every named statement nothing cites."""
    literals, patterns = citations(sources)
    used = literals | included(sql_files)
    return sorted(
        f"{source}: {name}"
        for name, source in statements(sql_files).items()
        if name not in used and not any(p.fullmatch(name) for p in patterns)
    )


def _sql_files() -> list[tuple[str, str]]:
    return [(p.name, p.read_text(encoding="utf-8")) for p in sorted(SQL_DIR.glob("*.sql"))]


def _sources() -> list[str]:
    return [p.read_text(encoding="utf-8") for p in sorted((ROOT / "chalicelib").rglob("*.py"))]


def test_every_named_statement_has_a_caller() -> None:
    assert uncalled(_sql_files(), _sources()) == []


def test_the_check_finds_a_statement_nothing_calls() -> None:
    sql = (
        "-- name: things_get\n-- Read one.\nSELECT 1\n\n"
        "-- name: things_gone\n-- Nobody runs this.\nSELECT 2\n\n"
        "-- name: catalogue_thing_list\n-- Through an f-string.\nSELECT 3\n\n"
        "-- name: things_all\n-- include: things_part\n\n"
        "-- part: things_part\nthings_part AS (SELECT 4)\n"
    )
    code = (
        '"""things_gone in a docstring is no caller."""\n'
        'def get(kind):\n    return queries["things_get"], queries[f"catalogue_{kind}_list"]\n'
        'ALL = "things_all"\n'
        'LOG = f"{kind}_{verb}"  # an f-string that names no statement\n'
    )
    assert uncalled([("things.sql", sql)], [code]) == ["things.sql: things_gone"]
