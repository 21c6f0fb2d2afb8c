"""Claim strategies: how a worker takes a batch of due executions (``TE_CLAIM_STRATEGY``).

* ``skip_locked`` (default, PostgreSQL): one statement whose candidates are a MATERIALIZED
  CTE read ``FOR UPDATE SKIP LOCKED`` (worker_claim_skip_locked).
* ``conditional_update`` (CockroachDB): read candidate ids without locks
  (worker_claim_candidates), then a compare-and-set UPDATE on their status
  (worker_claim_conditional); losers of a race simply get fewer rows.

Both end in the same take-and-return SQL (the ``claimed`` and ``claim_rows`` parts of
parts.sql) and return the same rows. While an endpoint is at its cap on this worker each
sends the statement's ``_capped`` twin (worker_capped.sql) instead.

``skip_locked`` also records a finalize batch nothing follows and claims into the slots it
frees in one statement (:meth:`SkipLockedClaim.record_and_claim`: worker_record_and_claim);
``conditional_update`` cannot (CockroachDB refuses a statement that updates one table
twice), so its finalizer records alone and the claimer claims.

Both commit before returning, so no transaction is ever held across a delivery. Both take
:class:`~chalicelib.worker.store.ClaimLimits`: the lease a claim starts and the
per-endpoint fairness caps. Flow-controlled endpoints are claimed by :class:`MeteredClaim`
(:mod:`chalicelib.worker.flow` says why). The worker's stages send them all through their
store, :class:`~chalicelib.worker.postgres.PostgresStore`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any, Protocol

from chalicelib.db.connection import Database, Row, Transaction
from chalicelib.db.queries import Query, queries, regional
from chalicelib.db.shapes import shaped
from chalicelib.domain.regions import ALL_REGIONS, RegionFilter
from chalicelib.errors import ConfigurationError
from chalicelib.worker.models import ClaimedExecution
from chalicelib.worker.store import NO_LIMITS, ClaimLimits

__all__ = [
    "NO_LIMITS",
    "ClaimLimits",
    "ClaimStrategy",
    "ConditionalUpdateClaim",
    "MeteredClaim",
    "SkipLockedClaim",
    "claim_strategy",
]


def render(name: str, region: RegionFilter) -> Query:
    """A named claim statement with the region filter put in (a no-op today)."""
    query = queries[name]
    return dataclasses.replace(query, sql=regional(query, region)[0])


def by_cap(name: str, capped: str, region: RegionFilter) -> tuple[Query, Query]:
    """Claim statement ``name`` and its twin ``capped`` (sent while an endpoint is at its
    cap) rendered as :func:`render` does: index the pair with :attr:`ClaimLimits.capped`."""
    return render(name, region), render(capped, region)


def run_shaped(tx: Transaction, query: Query, **params: Any) -> list[Row]:
    """``query`` run in ``tx`` with the parameters it names (the others dropped:
    :func:`chalicelib.db.shapes.shaped`)."""
    shape, values = shaped(query, params)
    return tx.run(shape, **values)


class ClaimStrategy(Protocol):
    #: Whether :meth:`record_and_claim` can record a finalize batch and claim at once.
    records_with_claim: bool

    def claim(
        self, db: Database, worker_id: str, batch: int, limits: ClaimLimits = NO_LIMITS
    ) -> list[ClaimedExecution]:
        """Claim in a transaction of its own."""
        ...

    def claim_in(
        self, tx: Transaction, worker_id: str, batch: int, limits: ClaimLimits
    ) -> list[ClaimedExecution]:
        """Claim inside ``tx`` (at READ COMMITTED: the finalizer's transaction, whose commit
        records a batch of attempts and claims the slots it frees in one durable write)."""
        ...

    def record_and_claim(
        self,
        tx: Transaction,
        worker_id: str,
        batch: int,
        limits: ClaimLimits,
        record: Mapping[str, str],
    ) -> tuple[set[str], list[ClaimedExecution]]:
        """Record a finalize batch (``record``: the parameters of worker_finalize_batch's
        record) and claim up to ``batch`` in one statement: (the executions recorded, those
        claimed). Only when :attr:`records_with_claim`."""
        ...


class SkipLockedClaim:
    """``FOR UPDATE SKIP LOCKED``: concurrent workers claim disjoint batches, no waiting."""

    records_with_claim = True

    def __init__(self, region: RegionFilter = ALL_REGIONS) -> None:
        self._region = region
        self._sql = by_cap("worker_claim_skip_locked", "worker_claim_skip_locked_capped", region)
        self._with_record = by_cap(
            "worker_record_and_claim", "worker_record_and_claim_capped", region
        )

    def claim(
        self, db: Database, worker_id: str, batch: int, limits: ClaimLimits = NO_LIMITS
    ) -> list[ClaimedExecution]:
        # One statement, sent alone: one round trip (worker_read_committed says why a READ
        # COMMITTED session suffices; a SERIALIZABLE one is correct too, only retried more).
        return db.transaction(
            lambda tx: self.claim_in(tx, worker_id, batch, limits),
            name="worker_claim_skip_locked",
            single=True,
        )

    def claim_in(
        self, tx: Transaction, worker_id: str, batch: int, limits: ClaimLimits
    ) -> list[ClaimedExecution]:
        params = {**limits.params(), **self._region.params()}
        query = self._sql[limits.capped]
        rows = run_shaped(tx, query, worker_id=worker_id, batch=batch, **params)
        return [ClaimedExecution.from_row(row) for row in rows]

    def record_and_claim(
        self,
        tx: Transaction,
        worker_id: str,
        batch: int,
        limits: ClaimLimits,
        record: Mapping[str, str],
    ) -> tuple[set[str], list[ClaimedExecution]]:
        params = {**limits.params(), **self._region.params(), **record}
        query = self._with_record[limits.capped]
        rows = run_shaped(tx, query, worker_id=worker_id, batch=batch, **params)
        recorded = {row["execution_id"] for row in rows if row["kind"] == "recorded"}
        claimed = [ClaimedExecution.from_row(row) for row in rows if row["kind"] == "claimed"]
        return recorded, claimed


class ConditionalUpdateClaim:
    """Candidates read without locks, then claimed by a status compare-and-set."""

    records_with_claim = False

    def __init__(self, region: RegionFilter = ALL_REGIONS) -> None:
        self._region = region
        self._candidates = by_cap(
            "worker_claim_candidates", "worker_claim_candidates_capped", region
        )
        self._update = queries["worker_claim_conditional"].sql

    def claim(
        self, db: Database, worker_id: str, batch: int, limits: ClaimLimits = NO_LIMITS
    ) -> list[ClaimedExecution]:
        # Two statements, each sent alone: the candidates need no snapshot shared with the
        # take, whose status guard decides ownership (a row taken meanwhile is passed over).
        params = limits.params()
        found = db.transaction(
            lambda tx: self._find(tx, batch, params, limits.capped),
            name="worker_claim_candidates",
            single=True,
        )
        if not found:
            return []
        return db.transaction(
            lambda tx: self._take(tx, found, worker_id, params),
            name="worker_claim_conditional",
            single=True,
        )

    def claim_in(
        self, tx: Transaction, worker_id: str, batch: int, limits: ClaimLimits
    ) -> list[ClaimedExecution]:
        params = limits.params()
        found = self._find(tx, batch, params, limits.capped)
        return self._take(tx, found, worker_id, params) if found else []

    def record_and_claim(
        self,
        tx: Transaction,
        worker_id: str,
        batch: int,
        limits: ClaimLimits,
        record: Mapping[str, str],
    ) -> tuple[set[str], list[ClaimedExecution]]:
        raise NotImplementedError("CockroachDB records and claims in separate statements")

    def _find(self, tx: Transaction, batch: int, params: dict[str, Any], capped: bool) -> list[str]:
        fairness = {k: params[k] for k in ("default_cap", "full", "busy", "pending")}
        query = self._candidates[capped]
        found = run_shaped(tx, query, batch=batch, **fairness, **self._region.params())
        return [row["execution_id"] for row in found]

    def _take(
        self, tx: Transaction, ids: list[str], worker_id: str, params: dict[str, Any]
    ) -> list[ClaimedExecution]:
        rows = tx.run(
            self._update,
            ids=ids,
            worker_id=worker_id,
            lease_ms=params["lease_ms"],
        )
        return [ClaimedExecution.from_row(row) for row in rows]


def claim_strategy(name: str, region: RegionFilter = ALL_REGIONS) -> ClaimStrategy:
    """The strategy a ``TE_CLAIM_STRATEGY`` value names."""
    if name == "skip_locked":
        return SkipLockedClaim(region)
    if name == "conditional_update":
        return ConditionalUpdateClaim(region)
    raise ConfigurationError(f"unknown claim strategy {name!r}")


class MeteredClaim:
    """Claims flow-controlled endpoints within their cluster-wide limits (both strategies:
    the endpoint_flow lock, not SKIP LOCKED, keeps two workers apart)."""

    def claim(
        self,
        db: Database,
        worker_id: str,
        batch: int,
        limits: ClaimLimits,
        names: tuple[str, ...],
    ) -> list[ClaimedExecution]:
        def work(tx: Transaction) -> list[ClaimedExecution]:
            # Row locks and a fresh snapshot per statement: see worker_claim_metered.
            tx.execute(queries["worker_read_committed"])
            return self.claim_in(tx, worker_id, batch, limits, names)

        return db.transaction(work, name="worker_claim_metered")

    def claim_in(
        self,
        tx: Transaction,
        worker_id: str,
        batch: int,
        limits: ClaimLimits,
        names: tuple[str, ...],
    ) -> list[ClaimedExecution]:
        refilled = tx.run(queries["worker_flow_refill"], names=sorted(names))
        allow = {
            str(row["endpoint"]): math.floor(float(row["tokens"]))
            for row in refilled
            if row["rate_limited"]
        }
        params = limits.params()
        rows = tx.run(
            queries["worker_claim_metered"],
            names=sorted(names),
            allow=_json(allow),
            batch=batch,
            worker_id=worker_id,
            lease_ms=params["lease_ms"],
            default_cap=params["default_cap"],
            busy=params["busy"],
            pending=params["pending"],
        )
        claimed = [ClaimedExecution.from_row(row) for row in rows]
        taken: dict[str, int] = {}
        for execution in claimed:
            if execution.endpoint in allow:
                taken[execution.endpoint] = taken.get(execution.endpoint, 0) + 1
        if taken:
            tx.execute(queries["worker_flow_debit"], taken=_json(taken))
        return claimed


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
