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

Every tagged parameter is optional and independent unless the statement's comment says
otherwise in a rule line, one per rule::

    -- shape: endpoint always           (the caller always gives it)
    -- shape: endpoint never            (the caller never does: another statement has it)
    -- shape: cron or trigger_type      (never both)

:func:`sent_shapes` lists the shapes those rules allow, which docs/reference/generate.py
writes out whole (docs/reference/sql/), and :func:`shaped` refuses to cut any other, so a
shape that is sent is one written there.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Mapping
from typing import Any

from chalicelib.db.queries import Query

_TAG = re.compile(r"\s*--\s*if\s+([a-z_][a-z0-9_]*)\s*$")
_RULE = re.compile(
    r"^--\s*shape:\s*([a-z_][a-z0-9_]*)\s+(?:(always|never)|or\s+([a-z_][a-z0-9_]*))\s*$",
    re.MULTILINE,
)
_PARAM = re.compile(r"(?<![:\w]):([a-z_][a-z0-9_]*)")


@functools.lru_cache(maxsize=64)
def tags(query: Query) -> frozenset[str]:
    """The parameters whose presence changes ``query``'s shape."""
    return frozenset(m.group(1) for line in query.sql.splitlines() if (m := _TAG.search(line)))


@functools.lru_cache(maxsize=64)
def sent_shapes(query: Query) -> tuple[frozenset[str], ...]:
    """The sets of tagged parameters ``query`` may be cut to (its ``-- shape:`` rules
    allow them), fewest first: what :func:`shaped` accepts and the reference writes out."""
    names = sorted(tags(query))
    rules = _RULE.findall(query.sql)
    unknown = sorted({n for rule in rules for n in (rule[0], rule[2]) if n} - set(names))
    if unknown:
        raise ValueError(f"query {query.name!r}: a shape rule names {unknown}, not a tag")
    subsets = (
        frozenset(combo)
        for k in range(len(names) + 1)
        for combo in itertools.combinations(names, k)
    )
    return tuple(s for s in subsets if all(_keeps(rule, s) for rule in rules))


def _keeps(rule: tuple[str, str, str], present: frozenset[str]) -> bool:
    name, always_or_never, other = rule
    if always_or_never == "always":
        return name in present
    if always_or_never == "never":
        return name not in present
    return not {name, other} <= present


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
    if present not in sent_shapes(query):
        given = ", ".join(sorted(present)) or "none"
        raise ValueError(
            f"query {query.name!r} cut with {given} given, a shape its '-- shape:' rules "
            "do not allow (docs/reference/sql/ writes out the ones they do)"
        )
    return cut_to(query, present)


def cut_to(query: Query, present: frozenset[str]) -> Query:
    """``query`` with only the tagged lines of the ``present`` parameters, tags removed."""
    lines = []
    for line in query.sql.splitlines():
        match = _TAG.search(line)
        if match is None:
            lines.append(line)
        elif match.group(1) in present:
            lines.append(line[: match.start()])
    suffix = ",".join(sorted(present))
    return Query(name=f"{query.name}[{suffix}]", sql="\n".join(lines), source=query.source)
