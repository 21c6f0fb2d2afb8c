"""How one statement travels over a pg8000 connection: prepared once per connection, then
bound and executed in one round trip; what its errors say; how timestamps come back.

:mod:`chalicelib.db.connection` builds transactions on top of :func:`execute`.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pg8000.native
from pg8000.converters import make_params
from pg8000.converters import timestamptz_in as pg8000_timestamptz_in
from pg8000.exceptions import DatabaseError as PgDatabaseError
from pg8000.exceptions import InterfaceError as PgInterfaceError

from chalicelib.domain.timefmt import EARLIEST_INSTANT, LATEST_INSTANT

#: PostgreSQL's type oid for TIMESTAMPTZ (the only timestamp type the schema uses).
TIMESTAMPTZ_OID = 1184


def timestamptz_in(text: str) -> datetime:
    """A TIMESTAMPTZ as PostgreSQL sends it (``2026-11-25 01:29:12.5+00``): 57x faster than
    pg8000's strptime (0.14 against 8 µs a value; a batch of 1,000 jobs or a claim of 50
    executions decodes one or more per row).

    Always a datetime, whatever the row holds: the schema keeps client-given instants inside
    :data:`~chalicelib.domain.timefmt.LATEST_INSTANT` (migration 010), but a value outside
    what ``datetime`` carries (``infinity``, a BC date, a year past 9999, written by hand or
    before that migration) would come back from pg8000 as a ``str`` and break every reader
    of the row, and one near those limits breaks whatever renders it in a time zone. Such a
    value reads as the nearest bound of the accepted range instead.
    """
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return _outside_datetime(text)
    if EARLIEST_INSTANT <= moment < LATEST_INSTANT:
        return moment
    return _nearest_bound(moment)


def _outside_datetime(text: str) -> datetime:
    """What ``fromisoformat`` refused: pg8000's parser, else the nearest bound."""
    try:
        parsed = pg8000_timestamptz_in(text)
    except (ValueError, OverflowError):
        parsed = None
    if not isinstance(parsed, datetime):
        return EARLIEST_INSTANT if _is_before_range(text) else LATEST_INSTANT
    if EARLIEST_INSTANT <= parsed < LATEST_INSTANT:
        return parsed
    return _nearest_bound(parsed)


def _nearest_bound(moment: datetime) -> datetime:
    return EARLIEST_INSTANT if moment < EARLIEST_INSTANT else LATEST_INSTANT


def _is_before_range(text: str) -> bool:
    """``-infinity`` and BC dates lie before the range; anything else unreadable after it."""
    return text.startswith("-") or text.endswith(" BC")


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of a pg8000 server error, or None."""
    if isinstance(exc, PgDatabaseError) and exc.args and isinstance(exc.args[0], dict):
        code = exc.args[0].get("C")
        return str(code) if code is not None else None
    return None


def server_message(exc: BaseException) -> str:
    if exc.args and isinstance(exc.args[0], dict):
        return str(exc.args[0].get("M", exc))
    return str(exc)


# pg8000.native re-parses the SQL text (":name" -> "$1") on every call; our statements are a
# fixed set of named queries, so the parse is memoized per text. Measured by bench/: ~2 ms
# per POST /jobs and 1.2x worker throughput.
_to_statement = functools.lru_cache(maxsize=1024)(pg8000.native.to_statement)

#: Prepared statements kept per connection (least recently used closed beyond it). The
#: statements are the fixed set of named queries, so in practice every one stays prepared.
MAX_PREPARED = 256


@dataclass(frozen=True)
class _Prepared:
    name_bin: bytes
    columns: Any
    input_funcs: Any
    make_vals: Callable[[dict[str, Any]], tuple[Any, ...]]
    statement: str


def _prepared(conn: pg8000.native.Connection) -> OrderedDict[str, _Prepared]:
    cache = getattr(conn, "_te_prepared", None)
    if cache is None:
        cache = OrderedDict()
        conn._te_prepared = cache
    return cache


def _prepare(conn: pg8000.native.Connection, sql: str) -> _Prepared:
    """The connection's prepared statement for ``sql``, parsed and described once.

    pg8000's ``execute_unnamed`` costs three round trips per statement (parse, describe,
    then bind and execute, each followed by a Sync); a prepared statement costs one (bind
    and execute). Measured by bench/: POST /jobs went from 17 round trips to 7.
    """
    cache = _prepared(conn)
    entry = cache.get(sql)
    if entry is not None:
        cache.move_to_end(sql)
        return entry
    statement, make_vals = _to_statement(sql)
    name_bin, columns, input_funcs = conn.prepare_statement(statement, ())
    entry = _Prepared(name_bin, columns, input_funcs, make_vals, statement)
    cache[sql] = entry
    if len(cache) > MAX_PREPARED:
        _, oldest = cache.popitem(last=False)
        conn.close_prepared_statement(oldest.name_bin)
    return entry


def forget_prepared(conn: pg8000.native.Connection) -> None:
    """Drop the connection's prepared statements from its cache (the server's copies are
    closed with the connection or were already invalid)."""
    _prepared(conn).clear()


def execute(conn: pg8000.native.Connection, sql: str, params: dict[str, Any]) -> Any:
    """Run one statement: the simple protocol without parameters, else the connection's
    prepared statement for it."""
    if not params:
        return conn.execute_simple(sql)
    entry = _prepare(conn, sql)
    try:
        named = entry.make_vals(params)
    except PgInterfaceError as exc:
        # A placeholder without its parameter: a bug in the caller, raised before anything
        # is sent. pg8000 says so with the class it also uses for a lost connection, which
        # callers retry; as a TypeError it fails once, loudly.
        raise TypeError(str(exc)) from exc
    values = make_params(conn.py_types, named)
    return conn.execute_named(
        entry.name_bin, values, entry.columns, entry.input_funcs, entry.statement
    )


def is_stale_statement(exc: BaseException) -> bool:
    """Whether a connection's prepared statement no longer fits the schema (a migration
    changed a table under it: 0A000 "cached plan must not change result type") or is gone
    (26000): the connection then forgets its statements and the transaction runs again."""
    state = sqlstate(exc)
    if state == "0A000":  # feature_not_supported: only this message is about our cache
        return "cached plan" in server_message(exc)
    return state == "26000"
