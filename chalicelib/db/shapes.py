"""One statement per filter shape, cut from a named statement that lists every filter.

A listing whose filters are optional used to write each one as ``(CAST(:p AS TEXT) IS NULL
OR col = :p)``. A prepared statement is planned for its parameters five times, then
PostgreSQL may switch to a generic plan made without them, and a generic plan cannot drop
a condition whose parameter is NULL: it cannot use ``col = :p`` or a keyset bound as an
index condition, and reads the index from its start (or the whole table) instead.

So such a statement is written with every filter on, each optional line ending with a tag
naming the parameter it needs::

    WHERE e.status = 'FAILED'
      AND e.endpoint = :endpoint                                   -- if endpoint
      AND (e.created_at, e.execution_id) < (:after_ts, :after_id)  -- if after_ts

and :func:`shaped` keeps a tagged line only when its parameter is given (not None). Each
shape is then an ordinary statement with no optional condition in it: its generic plan is
its custom plan, and pg8000 prepares it once per connection like any named statement. The
statement as written (every tag kept) is valid SQL, which the CockroachDB lint and the plan
tests read whole.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from chalicelib.db.queries import Query

_TAG = re.compile(r"\s*--\s*if\s+([a-z_][a-z0-9_]*)\s*$")
_PARAM = re.compile(r"(?<![:\w]):([a-z_][a-z0-9_]*)")


@functools.lru_cache(maxsize=64)
def tags(query: Query) -> frozenset[str]:
    """The parameters whose presence changes ``query``'s shape."""
    return frozenset(m.group(1) for line in query.sql.splitlines() if (m := _TAG.search(line)))


def shaped(query: Query, params: Mapping[str, Any]) -> tuple[Query, dict[str, Any]]:
    """``query`` cut to the parameters given, and those parameters (the ones its kept lines
    and untagged lines name; an absent one is dropped with its line)."""
    present = frozenset(name for name in tags(query) if params.get(name) is not None)
    cut = _cut(query, present)
    named = _named(cut)
    return cut, {k: v for k, v in params.items() if k in named}


@functools.lru_cache(maxsize=512)
def _named(query: Query) -> frozenset[str]:
    """The parameters ``query`` names (read once per shape: the worker's claims are cut on
    every call)."""
    return frozenset(_PARAM.findall(query.sql))


@functools.lru_cache(maxsize=512)
def _cut(query: Query, present: frozenset[str]) -> Query:
    lines = []
    for line in query.sql.splitlines():
        match = _TAG.search(line)
        if match is None:
            lines.append(line)
        elif match.group(1) in present:
            lines.append(line[: match.start()])
    suffix = ",".join(sorted(present))
    return Query(name=f"{query.name}[{suffix}]", sql="\n".join(lines), source=query.source)
