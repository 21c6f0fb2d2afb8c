"""The claims a worker sends, by name: :class:`ClaimStatements`.

Its claim strategy (:mod:`chalicelib.worker.strategies`) and the metered claim
(:mod:`chalicelib.worker.flow`), bound to the worker's database and id, sized by a
reserved :class:`~chalicelib.worker.room.ClaimPlan`. The claimer claims through it in
transactions of its own; the finalizer claims through it inside the statement or
transaction that records a batch. Nothing else of the claim reaches the database.
"""

from __future__ import annotations

from collections.abc import Mapping

from chalicelib.db.connection import Database, Transaction
from chalicelib.worker.flow import MeteredClaim
from chalicelib.worker.models import ClaimedExecution
from chalicelib.worker.room import ClaimPlan
from chalicelib.worker.strategies import ClaimStrategy


class ClaimStatements:
    """One worker's claim statements (see the module)."""

    def __init__(self, db: Database, worker_id: str, strategy: ClaimStrategy) -> None:
        self.db = db
        self.worker_id = worker_id
        self.strategy = strategy  #: TE_CLAIM_STRATEGY's
        self._metered = MeteredClaim()

    @property
    def records_with_claim(self) -> bool:
        """Whether a finalize batch nothing follows is recorded by the claim's statement
        (:meth:`record_and_claim`)."""
        return self.strategy.records_with_claim

    def claim(self, plan: ClaimPlan) -> list[ClaimedExecution]:
        """Claim up to the plan's room in a transaction of its own."""
        return self.strategy.claim(self.db, self.worker_id, plan.room, plan.limits)

    def claim_metered(self, plan: ClaimPlan, names: tuple[str, ...]) -> list[ClaimedExecution]:
        """Claim the flow-controlled endpoints ``names`` within their cluster-wide limits,
        in a transaction of its own."""
        return self._metered.claim(self.db, self.worker_id, plan.room, plan.limits, names)

    def claim_in(self, tx: Transaction, plan: ClaimPlan) -> list[ClaimedExecution]:
        """Claim up to the plan's room inside ``tx`` (a finalize transaction)."""
        return self.strategy.claim_in(tx, self.worker_id, plan.room, plan.limits)

    def record_and_claim(
        self, tx: Transaction, plan: ClaimPlan, record: Mapping[str, str]
    ) -> tuple[set[str], list[ClaimedExecution]]:
        """Record a finalize batch and claim up to the plan's room in one statement:
        (executions recorded, executions claimed). Only if :attr:`records_with_claim`."""
        return self.strategy.record_and_claim(tx, self.worker_id, plan.room, plan.limits, record)
