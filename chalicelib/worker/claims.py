"""Claim strategies: how a worker takes a batch of due executions (``TE_CLAIM_STRATEGY``).

* ``skip_locked`` (default, PostgreSQL): one ``UPDATE ... WHERE id IN (SELECT ... FOR UPDATE
  SKIP LOCKED)`` statement.
* ``conditional_update`` (CockroachDB): read candidate ids without locks, then a
  compare-and-set UPDATE on their status; losers of a race simply get fewer rows.

Both commit before returning, so no transaction is ever held across a delivery.
"""

from __future__ import annotations

from typing import Protocol

from chalicelib.db.connection import Database, Transaction
from chalicelib.db.queries import queries
from chalicelib.domain.regions import ALL_REGIONS, RegionFilter
from chalicelib.errors import ConfigurationError
from chalicelib.worker.models import ClaimedExecution

REGION_PLACEHOLDER = "{region_filter}"


def render(name: str, region: RegionFilter) -> str:
    """A named claim statement with the region filter put in (a no-op today)."""
    return queries[name].sql.replace(REGION_PLACEHOLDER, region.sql_clause("crdb_region"))


class ClaimStrategy(Protocol):
    def claim(self, db: Database, worker_id: str, batch: int) -> list[ClaimedExecution]: ...


class SkipLockedClaim:
    """``FOR UPDATE SKIP LOCKED``: concurrent workers claim disjoint batches, no waiting."""

    def __init__(self, region: RegionFilter = ALL_REGIONS) -> None:
        self._region = region
        self._sql = render("worker_claim_skip_locked", region)

    def claim(self, db: Database, worker_id: str, batch: int) -> list[ClaimedExecution]:
        rows = db.transaction(
            lambda tx: tx.run(self._sql, worker_id=worker_id, batch=batch, **self._region.params()),
            name="worker_claim_skip_locked",
        )
        return [ClaimedExecution.from_row(row) for row in rows]


class ConditionalUpdateClaim:
    """Candidates read without locks, then claimed by a status compare-and-set."""

    def __init__(self, region: RegionFilter = ALL_REGIONS) -> None:
        self._region = region
        self._candidates = render("worker_claim_candidates", region)
        self._update = queries["worker_claim_conditional"].sql

    def claim(self, db: Database, worker_id: str, batch: int) -> list[ClaimedExecution]:
        def work(tx: Transaction) -> list[ClaimedExecution]:
            # Re-run whole on 40001: the retry reads fresh candidates.
            tx.execute(queries["worker_read_committed"])
            found = tx.run(self._candidates, batch=batch, **self._region.params())
            if not found:
                return []
            ids = [row["execution_id"] for row in found]
            rows = tx.run(self._update, ids=ids, worker_id=worker_id)
            return [ClaimedExecution.from_row(row) for row in rows]

        return db.transaction(work, name="worker_claim_conditional")


def claim_strategy(name: str, region: RegionFilter = ALL_REGIONS) -> ClaimStrategy:
    """The strategy a ``TE_CLAIM_STRATEGY`` value names."""
    if name == "skip_locked":
        return SkipLockedClaim(region)
    if name == "conditional_update":
        return ConditionalUpdateClaim(region)
    raise ConfigurationError(f"unknown claim strategy {name!r}")
