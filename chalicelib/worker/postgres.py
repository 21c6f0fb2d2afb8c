"""The worker's store on PostgreSQL and CockroachDB: :class:`PostgresStore`.

The one module of the worker's ring that sends SQL (with the claim strategies it runs,
:mod:`chalicelib.worker.strategies`): the stages reach the database only through it, as a
:class:`~chalicelib.worker.store.WorkerStore`. Each method is the statement or transaction
the stage sent itself before there was a port, in the same order and shape:

* :meth:`PostgresStore.claim`: the strategy's claim (skip_locked: one statement sent alone;
  conditional_update: candidates, then a compare-and-set);
* :meth:`PostgresStore.claim_metered`: the metered claim's transaction;
* :meth:`PostgresStore.record`: a batch nothing follows, sent alone (worker_finalize_batch,
  or worker_record_and_claim with a plan); any other batch in one transaction with what
  follows its ends (callbacks, batches, keys), its holds and 410 pauses, and the refill
  claim (:meth:`PostgresStore.claim_in`) last;
* :meth:`PostgresStore.renew`: worker_renew_leases, sent alone;
* :meth:`PostgresStore.controlled`, :meth:`PostgresStore.config_values`,
  :meth:`PostgresStore.secrets`: one read each.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from chalicelib.db.connection import Database, Row, Transaction
from chalicelib.db.queries import queries
from chalicelib.domain.auto_pause import PausedReason
from chalicelib.domain.clock import utcnow
from chalicelib.services import auto_pause, callbacks, keys
from chalicelib.worker.models import ClaimedExecution
from chalicelib.worker.store import ClaimPlan, Controlled, Recording, StoredSecret
from chalicelib.worker.strategies import ClaimStrategy, MeteredClaim


class PostgresStore:
    """One worker's statements (see the module); thread-safe as its :class:`Database` is."""

    def __init__(
        self,
        db: Database,
        worker_id: str,
        strategy: ClaimStrategy,
        *,
        operator_endpoint: str | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        """``strategy``: ``TE_CLAIM_STRATEGY``'s; ``operator_endpoint``: where the event of
        a pause a 410 Gone causes is sent (``TE_OPERATOR_ENDPOINT``; None: nowhere);
        ``clock``: the worker's, which stamps such a pause and its event (as the attempt
        that caused it is stamped)."""
        self.db = db
        self._clock = clock
        self._worker_id = worker_id
        self.strategy = strategy
        self._metered = MeteredClaim()
        self._operator_endpoint = operator_endpoint

    @property
    def worker_id(self) -> str:
        return self._worker_id

    @property
    def records_with_claim(self) -> bool:
        return self.strategy.records_with_claim

    # -- claims --------------------------------------------------------------------------

    def claim(self, plan: ClaimPlan) -> list[ClaimedExecution]:
        return self.strategy.claim(self.db, self._worker_id, plan.room, plan.limits)

    def claim_metered(self, plan: ClaimPlan, names: tuple[str, ...]) -> list[ClaimedExecution]:
        return self._metered.claim(self.db, self._worker_id, plan.room, plan.limits, names)

    def claim_in(self, tx: Transaction, plan: ClaimPlan) -> list[ClaimedExecution]:
        """Claim up to the plan's room inside ``tx`` (a finalize transaction)."""
        return self.strategy.claim_in(tx, self._worker_id, plan.room, plan.limits)

    # -- records -------------------------------------------------------------------------

    def record(
        self, recording: Recording, plan: ClaimPlan | None
    ) -> tuple[set[str], list[ClaimedExecution]]:
        """One try: the batch alone in one statement (with the refill where the claim
        strategy records with it), or in a transaction with what follows it."""
        payload = recording.payload
        if recording.alone and plan is not None:
            return self._record_and_claim(payload, plan)
        if recording.alone:
            return _ids(self._finalize_alone(payload)), []

        def work(tx: Transaction) -> tuple[list[Row], list[ClaimedExecution]]:
            return self._finalize_and_claim(tx, payload, plan, recording)

        rows, claimed = self.db.transaction(work, name="worker_finalize_batch")
        return _ids(rows), claimed

    def _finalize_alone(self, payload: str) -> list[Row]:
        """``worker_finalize_batch`` sent alone, without BEGIN/SET/COMMIT: one round trip
        instead of four, at the worker pool's READ COMMITTED (wiring.process.ISOLATION). Sent
        twice after a lost connection, the second finds nothing RUNNING and changes nothing."""
        return self.db.transaction(
            lambda tx: tx.run(
                queries["worker_finalize_batch"],
                results=payload,
                worker_id=self._worker_id,
                writer=_writer(self._worker_id),
            ),
            name="worker_finalize_batch",
            single=True,
        )

    def _record_and_claim(
        self, payload: str, plan: ClaimPlan
    ) -> tuple[set[str], list[ClaimedExecution]]:
        """The batch recorded and its slots refilled by one statement, sent alone like
        :meth:`_finalize_alone` (worker_record_and_claim). Sent twice after a lost
        connection, the record changes nothing the second time; what the first one claimed
        stays RUNNING under this worker until its lease runs out, as after any claim whose
        answer is lost."""
        record: Mapping[str, str] = {"results": payload, "writer": _writer(self._worker_id)}
        return self.db.transaction(
            lambda tx: self.strategy.record_and_claim(
                tx, self._worker_id, plan.room, plan.limits, record
            ),
            name="worker_record_and_claim",
            single=True,
        )

    def _finalize_and_claim(
        self, tx: Transaction, payload: str, plan: ClaimPlan | None, recording: Recording
    ) -> tuple[list[Row], list[ClaimedExecution]]:
        rows = _finalize(tx, payload, self._worker_id)
        # Before the refill claim, which then passes over the held and paused endpoints.
        if recording.holds:
            tx.execute(queries["worker_hold_endpoints"], holds=json.dumps(recording.holds))
        if recording.gone:
            auto_pause.pause(
                tx,
                recording.gone,
                PausedReason.GONE,
                now=self._clock(),
                operator_endpoint=self._operator_endpoint,
            )
        if plan is None:
            return rows, []
        return rows, self.claim_in(tx, plan)

    # -- leases and reads ----------------------------------------------------------------

    def renew(self, ids: list[str], lease_ms: int) -> set[str]:
        """The renewal round's one statement, sent alone like the claim (guarded: safe to
        apply twice)."""

        def renew(tx: Transaction) -> list[Row]:
            sql = queries["worker_renew_leases"]
            return tx.run(sql, ids=ids, worker_id=self._worker_id, lease_ms=lease_ms)

        rows = self.db.transaction(renew, name="worker_renew_leases", single=True)
        return _ids(rows)

    def controlled(self) -> Controlled:
        rows = self.db.statement(queries["worker_controlled_endpoints"])  # a read: one trip
        return Controlled(
            excluded=tuple(str(row["name"]) for row in rows),
            metered=tuple(str(row["name"]) for row in rows if row["metered"]),
        )

    def config_values(self, name: str) -> dict[str, Any] | None:
        row = self.db.transaction(
            lambda tx: tx.one(queries["worker_config_values"], name=name), name="config_values"
        )
        return None if row is None else dict(row["values_json"])

    def secrets(self, names: list[str]) -> list[StoredSecret]:
        rows = self.db.transaction(
            lambda tx: tx.run(queries["worker_secret_values"], names=names),
            name="secret_values",
        )
        return [
            StoredSecret(
                name=row["name"],
                encrypted_value=row["encrypted_value"],
                previous_encrypted_value=row["previous_encrypted_value"],
                rotated_at=row["rotated_at"],
            )
            for row in rows
        ]


def _ids(rows: list[Row]) -> set[str]:
    return {row["execution_id"] for row in rows}


def _finalize(tx: Transaction, payload: str, worker_id: str) -> list[Row]:
    tx.execute(queries["worker_read_committed"])
    rows = tx.run(
        queries["worker_finalize_batch"],
        results=payload,
        worker_id=worker_id,
        writer=_writer(worker_id),
    )
    # What follows an ended execution (a callback job, a batch's on_complete) is written
    # in this transaction, with the final status; only rows that have one cost anything.
    ended = [row["execution_id"] for row in rows if row["callback"]]
    batches = [row["batch_id"] for row in rows if row["batch_id"]]
    if ended or batches:
        callbacks.follow_up(tx, execution_ids=ended, batch_ids=batches)
    # A keyed execution that ended releases the next one of its key, in this transaction.
    keys.changed(tx, keys.keyed_ids(rows))
    return rows


def _writer(worker_id: str) -> str:
    """Whose summary rows a finalize adds to (delivery_counts.writer): this worker's writer
    thread, the only one that writes them, so no two transactions update one row."""
    return f"{worker_id}/{threading.current_thread().name}"
