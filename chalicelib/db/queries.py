"""Named SQL queries, loaded from ``chalicelib/db/sql/*.sql``.

Each file holds one area's statements. A statement starts with a header line
``-- name: <query_name>`` followed by comment lines saying why it is shaped as it is, then
the SQL (pg8000 ``:param`` placeholders). Code refers to statements by name::

    from chalicelib.db.queries import queries
    tx.run(queries["worker_claim_skip_locked"], worker_id=..., batch=...)

Names are unique across all files; a duplicate is an error at load time.

Two markers keep one source of truth per contract:

* ``-- part: <part_name>`` starts a piece of SQL that is not a statement but is shared by
  several (the claim's take, its returned rows). A part is one CTE named as the part,
  ``<part_name> AS (...)`` (or ``AS MATERIALIZED (...)``), and nothing else: the statement
  that includes it writes ``WITH`` and the commas around it, so a part reads alone and a
  statement's source shows where each of its CTEs begins. A part may include other parts.
  A statement pulls it in with a line ``-- include: <part_name>`` (after a comma if one
  separates it from the CTE before: ``, -- include: <part_name>``), expanded at load time,
  so ``queries[name].sql`` is always the whole statement. A file includes its own parts and
  those of :data:`SHARED_PARTS` only, which holds parts and no statement. An unknown,
  unused or misshapen part, or an include from another file, is an error at load time.
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
_INCLUDE = re.compile(r"^(,? ?)--\s*include:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)
#: The one file whose parts every file may include; it holds no statement.
SHARED_PARTS = "parts.sql"

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
            if name in parts:
                raise ValueError(f"{source}: part {name!r} is defined twice")
            parts[name] = check_part(name, body, source)
        else:
            queries.append(Query(name=name, sql=body, source=source))
    return SqlFile(queries=queries, parts=parts)


def _code(body: str) -> str:
    """``body`` without its leading comment lines (a part's comment says why)."""
    lines = body.splitlines()
    while lines and (not lines[0].strip() or lines[0].lstrip().startswith("--")):
        lines.pop(0)
    return "\n".join(lines)


def _closing_paren(code: str, start: int) -> int:
    """Index of the parenthesis that closes the one at ``start`` (literals, quoted names and
    comments skipped), or -1 when it is never closed."""
    depth, i = 0, start
    while i < len(code):
        char = code[i]
        if char in "'\"":
            i = code.find(char, i + 1)
            if i < 0:
                return -1
        elif code.startswith("--", i):
            i = code.find("\n", i)
            if i < 0:
                return -1
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def is_one_cte(name: str, body: str) -> bool:
    """Whether ``body`` (after its comment lines) is one CTE named ``name``: ``name AS (...)``
    (or ``AS [NOT] MATERIALIZED (...)``) and nothing after the parenthesis closing it."""
    code = _code(body)
    opening = re.match(rf"{name}\s+AS\s+(?:NOT\s+)?(?:MATERIALIZED\s+)?\(", code)
    if opening is None:
        return False
    closing = _closing_paren(code, opening.end() - 1)
    return closing >= 0 and not re.sub(r"--[^\n]*", "", code[closing + 1 :]).strip()


def check_part(name: str, body: str, source: str) -> str:
    """``body``, if it is one CTE named ``name``; otherwise a ValueError saying what a part
    must be."""
    if not is_one_cte(name, body):
        raise ValueError(
            f"{source}: part {name!r} must be one CTE, '{name} AS (...)' and nothing after "
            "it (the statement that includes it writes WITH and the commas around it)"
        )
    return body


#: A part may include parts; deeper than this is a cycle.
MAX_INCLUDE_DEPTH = 4


def expand_includes(
    items: list[Query], parts: dict[str, str], used: set[str] | None = None
) -> list[Query]:
    """Replace every ``-- include: <part>`` line by the part's SQL. With ``used``, the
    parts included are added to it; without, a part none of ``items`` includes is an
    error."""
    check_unused = used is None
    used = set() if used is None else used

    def include(match: re.Match[str], depth: int = 0) -> str:
        lead, name = match.group(1), match.group(2)
        if name not in parts:
            raise ValueError(f"no SQL part named {name!r} to include")
        if depth > MAX_INCLUDE_DEPTH:
            raise ValueError(f"SQL part {name!r} includes itself (or nests too deep)")
        used.add(name)
        return lead + _INCLUDE.sub(lambda inner: include(inner, depth + 1), parts[name])

    expanded = [
        Query(name=q.name, sql=_INCLUDE.sub(include, q.sql), source=q.source) for q in items
    ]
    unused = sorted(set(parts) - used)
    if unused and check_unused:
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


def visible_parts(files: dict[str, SqlFile]) -> dict[str, dict[str, str]]:
    """Per file, the parts its statements and parts may include: its own and the shared
    ones (a name defined in both is an error: an include must mean one part)."""
    shared = files.get(SHARED_PARTS, SqlFile(queries=[], parts={}))
    if shared.queries:
        raise ValueError(f"{SHARED_PARTS} holds parts only, not {shared.queries[0].name!r}")
    visible: dict[str, dict[str, str]] = {}
    for source, parsed in files.items():
        if source == SHARED_PARTS:
            continue
        twice = sorted(set(parsed.parts) & set(shared.parts))
        if twice:
            raise ValueError(f"{source}: part {twice[0]!r} is defined in {SHARED_PARTS} too")
        visible[source] = {**shared.parts, **parsed.parts}
    return visible


def expand_files(files: dict[str, SqlFile]) -> list[Query]:
    """Every file's statements with their includes expanded from the parts they may see;
    an include of another file's part is an error naming that file."""
    owner = {name: source for source, parsed in files.items() for name in parsed.parts}
    expanded: list[Query] = []
    used: set[str] = set()
    for source, parts in visible_parts(files).items():
        texts = [*parts.values(), *(q.sql for q in files[source].queries)]
        for name in (m.group(2) for text in texts for m in _INCLUDE.finditer(text)):
            if name not in parts and name in owner:
                raise ValueError(
                    f"{source} includes part {name!r} of {owner[name]}: a file includes its "
                    f"own parts and those of {SHARED_PARTS} only"
                )
        expanded.extend(expand_includes(files[source].queries, parts, used))
    unused = sorted(set(owner) - used)
    if unused:
        raise ValueError(f"SQL parts included by no statement: {', '.join(unused)}")
    return expanded


@functools.lru_cache(maxsize=1)
def load_queries() -> QueryRegistry:
    files = {
        path.name: parse_sql_file(path.read_text(encoding="utf-8"), path.name)
        for path in sorted(SQL_DIR.glob("*.sql"))
    }
    return QueryRegistry(expand_files(files))


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
