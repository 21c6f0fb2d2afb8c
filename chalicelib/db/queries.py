"""Named SQL queries, loaded from ``chalicelib/db/sql/*.sql``.

Each file holds one area's statements. A statement starts with a header line
``-- name: <query_name>`` followed by comment lines saying why it is shaped as it is, then
the SQL (pg8000 ``:param`` placeholders). Code refers to statements by name::

    from chalicelib.db.queries import queries
    tx.run(queries["worker_claim_skip_locked"], worker_id=..., batch=...)

Names are unique across all files; a duplicate is an error at load time.

Two markers keep one source of truth per contract:

* ``-- part: <part_name>`` starts a piece of SQL that is not a statement but is shared by
  several (the claim's take-and-return tail); a part may include other parts. A statement
  pulls it in with a line
  ``-- include: <part_name>``, expanded at load time, so ``queries[name].sql`` is always the
  whole statement. An unknown or unused part is an error at load time.
* ``/*region_filter*/ TRUE`` (:data:`REGION_MARKER`) is where a statement filters by
  region. It is valid SQL as written (a comment, then ``TRUE``), so the statement runs
  unchanged while the filter is inactive; :func:`regional` puts the condition in.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chalicelib.domain.regions import RegionFilter

SQL_DIR = Path(__file__).parent / "sql"
_HEADER = re.compile(r"^--\s*(name|part):\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)
_INCLUDE = re.compile(r"^--\s*include:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)

#: Where a statement's region condition goes; see :func:`regional`.
REGION_MARKER = "/*region_filter*/ TRUE"


@dataclass(frozen=True)
class Query:
    """One named statement and the file it came from."""

    name: str
    sql: str
    source: str


@dataclass(frozen=True)
class SqlFile:
    """A file's statements and the parts they may include."""

    queries: list[Query]
    parts: dict[str, str]


def parse_sql_file(text: str, source: str) -> SqlFile:
    """Split a file into its named statements and parts (includes not yet expanded)."""
    headers = list(_HEADER.finditer(text))
    queries: list[Query] = []
    parts: dict[str, str] = {}
    for i, match in enumerate(headers):
        kind, name = match.group(1), match.group(2)
        end = headers[i + 1].start() if i + 1 < len(headers) else len(text)
        body = text[match.end() : end].strip().rstrip(";").strip()
        if not body:
            raise ValueError(f"{source}: {kind} {name!r} is empty")
        if kind == "part":
            parts[name] = body
        else:
            queries.append(Query(name=name, sql=body, source=source))
    return SqlFile(queries=queries, parts=parts)


#: A part may include parts; deeper than this is a cycle.
MAX_INCLUDE_DEPTH = 4


def expand_includes(items: list[Query], parts: dict[str, str]) -> list[Query]:
    """Replace every ``-- include: <part>`` line by the part's SQL."""
    used: set[str] = set()

    def include(match: re.Match[str], depth: int = 0) -> str:
        name = match.group(1)
        if name not in parts:
            raise ValueError(f"no SQL part named {name!r} to include")
        if depth > MAX_INCLUDE_DEPTH:
            raise ValueError(f"SQL part {name!r} includes itself (or nests too deep)")
        used.add(name)
        return _INCLUDE.sub(lambda inner: include(inner, depth + 1), parts[name])

    expanded = [
        Query(name=q.name, sql=_INCLUDE.sub(include, q.sql), source=q.source) for q in items
    ]
    unused = sorted(set(parts) - used)
    if unused:
        raise ValueError(f"SQL parts included by no statement: {', '.join(unused)}")
    return expanded


class QueryRegistry:
    """All named queries; ``registry["name"]``."""

    def __init__(self, items: list[Query]) -> None:
        self._by_name: dict[str, Query] = {}
        for query in items:
            if query.name in self._by_name:
                other = self._by_name[query.name].source
                raise ValueError(f"query {query.name!r} defined in {other} and {query.source}")
            self._by_name[query.name] = query

    def __getitem__(self, name: str) -> Query:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"no SQL query named {name!r} in {SQL_DIR}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def names(self) -> list[str]:
        return sorted(self._by_name)


@functools.lru_cache(maxsize=1)
def load_queries() -> QueryRegistry:
    items: list[Query] = []
    parts: dict[str, str] = {}
    for path in sorted(SQL_DIR.glob("*.sql")):
        parsed = parse_sql_file(path.read_text(encoding="utf-8"), path.name)
        items.extend(parsed.queries)
        for name, body in parsed.parts.items():
            if name in parts:
                raise ValueError(f"SQL part {name!r} defined twice ({path.name})")
            parts[name] = body
    return QueryRegistry(expand_includes(items, parts))


class _LazyRegistry:
    """Module-level handle that loads the files on first use (not at import time)."""

    def __getitem__(self, name: str) -> Query:
        return load_queries()[name]

    def __contains__(self, name: object) -> bool:
        return name in load_queries()


queries = _LazyRegistry()


def regional(query: Query, region: RegionFilter) -> tuple[str, dict[str, Any]]:
    """The statement's SQL with the region condition in place, and the extra parameters.

    While the filter is inactive (single region, today) the statement runs exactly as
    written; an active filter replaces :data:`REGION_MARKER` with its condition.
    """
    if REGION_MARKER not in query.sql:
        raise ValueError(f"query {query.name!r} has no {REGION_MARKER!r} marker")
    return query.sql.replace(REGION_MARKER, region.sql_clause()), region.params()
