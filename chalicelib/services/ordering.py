"""Ordering keys: executions of one endpoint that share a key start one at a time.

A keyed execution is born waiting behind its key's head (``executions.ordering_wait``,
outside the indexes the claim walks: migration 031). Whatever creates, ends or re-queues a
keyed execution settles its key here, in its own transaction, so a release is never lost
nor made twice: first the key's row is written (the lock: ``ordering_lock_keys`` or
``ordering_lock_changed``), then ``ordering_settle`` decides the head again. Each function
sends nothing when no keyed row is involved: a job without a key costs nothing.

A head that ended FAILED on an endpoint with ``"ordering": {"on_failure": "block"}``
blocks its key: nothing is released until a retry of that execution
(:func:`changed` with ``revived``) or :func:`skip`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from chalicelib.db.connection import Row, Transaction
from chalicelib.db.queries import queries
from chalicelib.errors import OrderingKeyNotBlocked


def _keys_json(pairs: Iterable[tuple[str, str]]) -> str:
    return json.dumps([{"endpoint": e, "key": k} for e, k in sorted(set(pairs))])


def created(tx: Transaction, pairs: Iterable[tuple[str, str]]) -> None:
    """Keys (endpoint, key) that ``tx`` just gave new executions (born waiting): lock them
    and settle their heads."""
    keys = sorted(set(pairs))
    if not keys:
        return
    tx.run(queries["ordering_lock_keys"], keys=_keys_json(keys))
    settle(tx, keys)


def changed(tx: Transaction, execution_ids: Iterable[str], *, revived: Iterable[str] = ()) -> None:
    """Keyed executions that ``tx`` just ended (SUCCESS, FAILED, CANCELLED) or re-queued
    (``revived``: a retry, which unblocks the key its failed head blocked): lock their keys,
    block a key whose head failed where the endpoint says so, and settle them. Call it only
    with keyed executions (the caller knows from the rows it moved)."""
    ids = sorted(set(execution_ids) | set(revived))
    if not ids:
        return
    rows = tx.run(queries["ordering_lock_changed"], ids=ids, revived=sorted(set(revived)))
    settle(tx, [(row["endpoint"], row["key"]) for row in rows])


def settle(tx: Transaction, pairs: Iterable[tuple[str, str]]) -> None:
    """Decide the heads of these locked keys again (``ordering_settle``)."""
    keys = sorted(set(pairs))
    if keys:
        tx.run(queries["ordering_settle"], keys=_keys_json(keys))


def keyed_ids(rows: Iterable[Row], column: str = "ordering_key") -> list[str]:
    """The execution ids of ``rows`` that carry an ordering key."""
    return [row["execution_id"] for row in rows if row.get(column)]


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
