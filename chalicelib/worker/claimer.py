"""The claimer: the stage of the worker's ring that takes due executions.

It waits in the ledger for room (free slots, and those whose attempts are being recorded:
:meth:`~chalicelib.worker.holdings.Holdings.claimable`), reserves that room
(:class:`~chalicelib.worker.room.Room`), claims up to it through the worker's store
(:meth:`~chalicelib.worker.store.WorkerStore.claim`, one commit) and hands what it took to
the :class:`~chalicelib.worker.starter.Starter`, which holds it and starts the deliveries.

The finalizer claims too, where it records (a refill, in the same room): one commit
records a batch and refills the slots it frees. With a strategy that records and claims in
one statement (PostgreSQL's), the claimer leaves the slots of attempts being recorded to
that refill and claims only slots that are free (at start, after an idle spell, or what a
refill did not fill). Paused, held and flow-controlled endpoints are left out of the
claim; flow-controlled ones get a metered claim of their own (:mod:`chalicelib.worker.flow`).
It sleeps ``TE_WORKER_POLL_INTERVAL_MS`` only when nothing was due;
:mod:`chalicelib.worker.idle` says what ends that sleep early.
"""

from __future__ import annotations

from collections.abc import Callable

from chalicelib.worker.flow import Controls
from chalicelib.worker.idle import IdleWait
from chalicelib.worker.models import ClaimedExecution
from chalicelib.worker.reporting import ClaimLoopHealth
from chalicelib.worker.room import Room
from chalicelib.worker.starter import Starter
from chalicelib.worker.store import ClaimPlan, WorkerStore


class Claimer:
    """Claims into the room and hands what it took on (see the module)."""

    def __init__(
        self,
        store: WorkerStore,
        room: Room,
        starter: Starter,
        *,
        controls: Controls,
        idle: IdleWait,
        health: ClaimLoopHealth,
    ) -> None:
        """``controls``: the endpoints left out of the claim, re-read once per poll interval
        (its :attr:`~chalicelib.worker.flow.Controls.interval`, this loop's too)."""
        self.store = store
        self._room = room
        self._starter = starter
        self._controls = controls
        self._idle = idle
        self._health = health

    def run(self, stopping: Callable[[], bool]) -> None:
        """Claim until ``stopping()``; a failed claim (the database, a bug) backs off. The
        finalizer refills where it records only while this runs."""
        with self._room.refilling(stopping):
            while not stopping():
                if not self._wait_for_room(stopping):
                    break
                try:
                    claimed = self.run_once()
                    self._health.succeeded()
                except Exception as exc:  # never the end of the worker
                    self._idle.sleep(self._health.failed(exc))
                    continue
                if claimed == 0:
                    self._idle.sleep(self._controls.idle_sleep(self._controls.interval))

    def run_once(self) -> int:
        """Claim up to the room once and start the deliveries; returns how many."""
        self._controls.refresh()
        taken = self._claim_own(self.store.claim)
        if taken is None:
            return 0  # no room: a metered claim that is due stays due
        # Started already: a failure of the metered claim must not strand these.
        names = self._controls.metered_due()  # flow-controlled endpoints, when one is due
        if names:
            taken += self._claim_own(lambda plan: self.store.claim_metered(plan, names)) or 0
        return taken

    def _wait_for_room(self, stopping: Callable[[], bool]) -> bool:
        return self._room.wait(stopping, self._controls.interval, self._takes_recording())

    def _claim_own(self, claim: Callable[[ClaimPlan], list[ClaimedExecution]]) -> int | None:
        """One claim in a transaction of its own, in the room reserved for it: what it
        took is held and started; returns how many, or None if there was no room."""
        plan = self._room.reserve(recording=self._takes_recording())
        if plan is None:
            return None
        batch: list[ClaimedExecution] = []
        try:
            batch = claim(plan)
        finally:
            self._starter.start(plan, batch)
        return len(batch)

    def _takes_recording(self) -> bool:
        """Whether this loop's claims take the slots of attempts being recorded: not where
        the finalizer's record refills them (PostgreSQL), unless flow-controlled endpoints
        exist, whose metered claim only this loop makes (left only free slots, it could
        wait behind refills that keep every slot busy)."""
        return not self.store.records_with_claim or bool(self._controls.metered)
