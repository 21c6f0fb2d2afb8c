"""Named SQL queries, loaded from ``chalicelib/db/sql/*.sql``.

Each file holds one area's statements. A statement starts with a header line
``-- name: <query_name>`` followed by comment lines saying why it is shaped as it is, then
the SQL (pg8000 ``:param`` placeholders). Code refers to statements by name::

    from chalicelib.db.queries import queries
    tx.run(queries["claim_skip_locked"], worker_id=..., batch=...)

Names are unique across all files; a duplicate is an error at load time.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

SQL_DIR = Path(__file__).parent / "sql"
_HEADER = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Query:
    """One named statement and the file it came from."""

    name: str
    sql: str
    source: str


def parse_sql_file(text: str, source: str) -> list[Query]:
    """Split a file into its named statements."""
    headers = list(_HEADER.finditer(text))
    result = []
    for i, match in enumerate(headers):
        end = headers[i + 1].start() if i + 1 < len(headers) else len(text)
        body = text[match.end() : end].strip().rstrip(";").strip()
        if not body:
            raise ValueError(f"{source}: query {match.group(1)!r} is empty")
        result.append(Query(name=match.group(1), sql=body, source=source))
    return result


class QueryRegistry:
    """All named queries; ``registry["name"]`` or ``registry.name``."""

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
    for path in sorted(SQL_DIR.glob("*.sql")):
        items.extend(parse_sql_file(path.read_text(encoding="utf-8"), path.name))
    return QueryRegistry(items)


class _LazyRegistry:
    """Module-level handle that loads the files on first use (not at import time)."""

    def __getitem__(self, name: str) -> Query:
        return load_queries()[name]

    def __contains__(self, name: object) -> bool:
        return name in load_queries()


queries = _LazyRegistry()
