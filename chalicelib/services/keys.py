"""Keyed executions: ordering keys and concurrency keys.

An ordering key (``jobs.ordering_key``) makes executions of one endpoint that share it start
one at a time, in order; a concurrency key (``jobs.concurrency_key``) lets at most the
endpoint's ``flow_control.max_concurrency_per_key`` of them run at once. Either way, an
execution waiting for its key's turn (``executions.ordering_wait``) is outside the indexes
the claim walks (migrations 031 and 032). Whatever creates, ends or re-queues a keyed
execution settles its key here, in its own transaction, so a release is never lost nor made
twice: first the key's row is written (the lock: ``ordering_lock_keys``,
``concurrency_lock_keys`` or ``keys_lock_changed``), then ``ordering_settle`` decides the
head again, or ``concurrency_settle`` the room. Each function sends nothing when no keyed
row is involved, and only the statements of the kinds involved: a job without a key costs
nothing.

A head that ended FAILED on an endpoint with ``"ordering": {"on_failure": "block"}``
blocks its ordering key: nothing is released until a retry of that execution
(:func:`changed` with ``revived``) or :func:`skip`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from chalicelib.db.connection import Row, Transaction
from chalicelib.db.queries import queries
from chalicelib.errors import OrderingKeyNotBlocked

Pair = tuple[str, str]  #: (endpoint, key)


def _keys_json(pairs: Iterable[Pair]) -> str:
    return json.dumps([{"endpoint": e, "key": k} for e, k in sorted(set(pairs))])


def created(
    tx: Transaction, pairs: Iterable[Pair] = (), *, concurrency: Iterable[Pair] = ()
) -> None:
    """Keys that ``tx`` just gave new executions (born waiting): ``pairs``, ordering keys,
    and ``concurrency``, the concurrency keys of gated executions. Locks them (ordering
    keys first, then concurrency keys: every transaction locks in that order) and settles
    them."""
    ordered, gated = sorted(set(pairs)), sorted(set(concurrency))
    if ordered:
        tx.run(queries["ordering_lock_keys"], keys=_keys_json(ordered))
    if gated:
        tx.run(queries["concurrency_lock_keys"], keys=_keys_json(gated))
    settle(tx, ordered, concurrency=gated)


def created_rows(tx: Transaction, rows: Iterable[Mapping[str, Any]]) -> None:
    """:func:`created` for the rows a creating statement returned (each with its
    ``endpoint``, ``ordering_key`` and ``concurrency_key``, NULL unless gated)."""
    rows = list(rows)
    created(
        tx,
        [(r["endpoint"], r["ordering_key"]) for r in rows if r.get("ordering_key")],
        concurrency=[
            (r["endpoint"], r["concurrency_key"]) for r in rows if r.get("concurrency_key")
        ],
    )


def changed(tx: Transaction, execution_ids: Iterable[str], *, revived: Iterable[str] = ()) -> None:
    """Keyed executions that ``tx`` just ended (SUCCESS, FAILED, CANCELLED) or re-queued
    (``revived``: a retry, which unblocks the ordering key its failed head blocked): lock
    their keys of both kinds, block an ordering key whose head failed where the endpoint
    says so, and settle them. Call it only with keyed executions (the caller knows from
    the rows it moved: :func:`keyed_ids`)."""
    ids = sorted(set(execution_ids) | set(revived))
    if not ids:
        return
    rows = tx.run(queries["keys_lock_changed"], ids=ids, revived=sorted(set(revived)))
    settle(
        tx,
        [(row["endpoint"], row["key"]) for row in rows if row["kind"] == "ordering"],
        concurrency=[(row["endpoint"], row["key"]) for row in rows if row["kind"] != "ordering"],
    )


def settle(tx: Transaction, pairs: Iterable[Pair], *, concurrency: Iterable[Pair] = ()) -> None:
    """Decide the heads of these locked ordering keys again (``ordering_settle``) and the
    room of these locked concurrency keys (``concurrency_settle``)."""
    ordered, gated = sorted(set(pairs)), sorted(set(concurrency))
    if ordered:
        tx.run(queries["ordering_settle"], keys=_keys_json(ordered))
    if gated:
        tx.run(queries["concurrency_settle"], keys=_keys_json(gated))


def keyed_ids(rows: Iterable[Row]) -> list[str]:
    """The execution ids of ``rows`` that carry a key of either kind (``ordering_key``,
    ``concurrency_key``: a gated execution's)."""
    return [
        row["execution_id"] for row in rows if row.get("ordering_key") or row.get("concurrency_key")
    ]


@dataclass(frozen=True)
class BlockedKey:
    """One blocked key of an endpoint, as the API lists it."""

    key: str
    execution_id: str
    since: datetime

    @classmethod
    def from_row(cls, row: Row) -> BlockedKey:
        return cls(key=row["key"], execution_id=row["execution_id"], since=row["since"])


def blocked_page(
    tx: Transaction, endpoint: str, *, after: str | None, limit: int
) -> tuple[list[BlockedKey], bool]:
    """One page of ``endpoint``'s blocked keys after key ``after``: (keys, more)."""
    rows = tx.run(
        queries["ordering_blocked_page"], endpoint=endpoint, after=after, limit_plus_one=limit + 1
    )
    return [BlockedKey.from_row(r) for r in rows[:limit]], len(rows) > limit


def skip(tx: Transaction, endpoint: str, key: str) -> None:
    """Unblock ``key``: its failed head stays FAILED, the next execution is released.
    409 when the key is not blocked."""
    rows = tx.run(queries["ordering_skip"], endpoint=endpoint, key=key)
    if not rows:
        raise OrderingKeyNotBlocked(
            f"Ordering key '{key}' of endpoint '{endpoint}' is not blocked: only a key "
            "waiting on its failed head can be skipped."
        )
    settle(tx, [(endpoint, key)])
