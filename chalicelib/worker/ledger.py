"""The worker's ledger: the one thread-safe record every stage of its ring writes to.

A claim's commit holds what it took (:mod:`chalicelib.worker.room`), the delivery loop
marks a delivery ended (or lost), the finalizer releases what it recorded
(:mod:`chalicelib.worker.worker`). :class:`Ledger` is that record: the
:class:`~chalicelib.worker.holdings.Holdings` under one lock, the condition the claimer
waits on for room, and the counts of what was claimed and finalized. It gives send slots
back to the delivery loop's gate (:class:`~chalicelib.worker.send_slots.SendSlots`) when
attempts are recorded. Its clock is injected (``time.monotonic`` unless told): it must be
the holdings' clock.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterable

from chalicelib.worker.holdings import Holdings
from chalicelib.worker.models import ClaimedExecution, FinishedExecution
from chalicelib.worker.reporting import log_finalized
from chalicelib.worker.send_slots import SendSlots
from chalicelib.worker.store import ClaimLimits

#: Claim once at least 1/MIN_BATCH_SHARE of the capacity is free (or after
#: CLAIM_LINGER_SEC): fewer, larger claims mean fewer commits per delivered execution.
MIN_BATCH_SHARE = 4
CLAIM_LINGER_SEC = 0.002


class Ledger:
    """The ring's one record of what the worker holds (thread-safe).

    * the claimer: :meth:`wait_for_room`; the room it and the finalizer's refills
      reserve (:class:`~chalicelib.worker.room.Room`): :meth:`room`, :meth:`take`;
    * the delivery loop: :meth:`owned` before a send, :meth:`delivered` after it,
      :meth:`release` for one it could not finish;
    * the finalizer: :meth:`recorded` once a batch's attempts are written;
    * the lease keeper: :meth:`due_for_renewal` and :meth:`renewed`.

    ``wake`` ends the claimer's idle sleep: called when an endpoint that was at its share
    gets room again (its backlog may be all that is due).

    A claim's room either takes the slots of attempts being recorded (``recording``: they
    free at the finalizer's next commit, :meth:`Holdings.claimable`), or only free slots
    (:meth:`Holdings.free`): the claimer's own loop leaves the recording slots to the refill
    where the finalizer claims in the statement that records (PostgreSQL).
    """

    def __init__(
        self,
        holdings: Holdings,
        send_slots: SendSlots,
        wake: Callable[[], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._holdings = holdings
        #: What the ledger and the claims it sizes read the time from (the holdings' clock).
        self.clock = clock
        self.send_slots = send_slots
        self._wake = wake
        self._cond = threading.Condition()
        self._full: frozenset[str] = frozenset()  # endpoints at their share, last claim
        self._nudged = False  # work was queued: look in the reserve at once
        self._counts = {"claimed": 0, "succeeded": 0, "retrying": 0, "failed": 0}

    @property
    def capacity(self) -> int:
        return self._holdings.capacity

    @property
    def lease_sec(self) -> float:
        return self._holdings.lease_sec

    def __len__(self) -> int:
        with self._cond:
            return len(self._holdings)

    def counts(self) -> dict[str, int]:
        """Executions claimed and finalized (by outcome) since the worker started."""
        with self._cond:
            return dict(self._counts)

    def occupancy(self) -> tuple[int, int]:
        """(executions held, of those the ones whose attempts wait to be recorded), read
        together so the second never exceeds the first."""
        with self._cond:
            return len(self._holdings), self._holdings.awaiting_record

    # -- the claimer ---------------------------------------------------------------------

    def wait_for_room(
        self, stopping: Callable[[], bool], poll_interval: float, *, recording: bool = True
    ) -> bool:
        """Block until a batch worth claiming is free (``recording``: counting the slots of
        attempts being recorded); False if asked to stop meanwhile.

        Room the endpoints with work here may take is claimed once a batch's worth is free
        (or after :data:`CLAIM_LINGER_SEC`). The reserve (room only other endpoints' work
        may take: the endpoints with work are at their caps) is claimed when a
        notification or a nudge says work was queued (:meth:`nudge`), else once a poll
        interval, the cadence an idle worker looks for work at. Claiming into it on every
        slot that frees made the claimer take, in a claim of its own, room the finalizer's
        next refill fills in the statement that records: two statements where one does.
        """
        started = self.clock()
        with self._cond:
            while not stopping():
                timeout = self._until_room(self.clock() - started, poll_interval, recording)
                if timeout is None:
                    return True
                self._cond.wait(timeout)
        return False

    def _until_room(self, waited: float, poll_interval: float, recording: bool) -> float | None:
        """Under the lock, ``waited`` seconds into a wait for room: None if a claim is
        worth making now, else how long to wait before looking again (unless woken)."""
        room = self._room(recording)
        usable = self._holdings.usable(room, recording=recording)
        min_batch = max(1, self._holdings.capacity // MIN_BATCH_SHARE)
        if usable >= min_batch or (usable > 0 and waited >= CLAIM_LINGER_SEC):
            return None
        if room > usable and (self._nudged or waited >= poll_interval):
            self._nudged = False
            return None
        if usable > 0:
            return max(CLAIM_LINGER_SEC - waited, 0.0)
        if room > 0:
            return max(poll_interval - waited, 0.0)
        return poll_interval

    def nudge(self) -> None:
        """Work was queued (a notification, an in-process nudge): the next wait for room
        claims into the reserve at once instead of at the poll interval."""
        with self._cond:
            self._nudged = True
            self._cond.notify_all()

    def room(
        self, excluded: tuple[str, ...], *, recording: bool = True, pending: int = 0
    ) -> tuple[int, ClaimLimits]:
        """How many the next claim may take (``recording``: the slots of attempts being
        recorded included; ``pending``: less the room claims in flight reserved), and its
        limits (``excluded``: the endpoints paused, held or flow-controlled, kept out of its
        LIMIT; ``pending`` comes off every endpoint's share)."""
        with self._cond:
            limits = dataclasses.replace(self._holdings.limits(pending), excluded=excluded)
            self._full = frozenset(limits.full)
            return self._holdings.batch(self._room(recording) - pending, pending), limits

    def _room(self, recording: bool) -> int:
        return self._holdings.claimable() if recording else self._holdings.free()

    def take(self, batch: list[ClaimedExecution], sent_at: float) -> None:
        """A claim committed: keep what it took (``sent_at``: before the claim was sent)."""
        with self._cond:
            self._holdings.add(batch, sent_at)
            self._counts["claimed"] += len(batch)

    # -- the delivery loop ---------------------------------------------------------------

    def owned(self, execution_id: str) -> bool:
        """Asked just before a send: the lease still surely holds."""
        with self._cond:
            return self._holdings.owned(execution_id)

    def delivered(self, finished: FinishedExecution, *, sent: bool) -> None:
        """Its delivery ended (or it finished without one): the endpoint's share is free;
        ``sent``: it holds a send slot until its attempt is recorded."""
        with self._cond:
            self._holdings.delivered(finished.execution_id, finished.attempt_number, slot=sent)
            endpoint = finished.endpoint
            wake = endpoint in self._full and self._holdings.room(endpoint) >= max(
                1, self._holdings.cap(endpoint) // MIN_BATCH_SHARE
            )
            if wake:
                self._full = frozenset()
            self._cond.notify_all()
        if wake:
            self._wake()

    def release(self, execution_id: str, attempt: int, *, counter: str | None = None) -> None:
        """It leaves the worker: recorded (``counter``: the outcome it is counted under), or
        left RUNNING for the reclaimer. Counted in the same step as it leaves, so whoever
        waits for the worker to be empty (:meth:`wait_empty`) finds it counted."""
        self._release_all([(execution_id, attempt, counter)])

    def _release_all(self, leaving: Iterable[tuple[str, int, str | None]]) -> None:
        """Every (execution, attempt, counter) of ``leaving`` released in one step: one
        wake-up of the waiters and one of the delivery loop for the slots they free."""
        slots = 0
        with self._cond:
            for execution_id, attempt, counter in leaving:
                if counter is not None:
                    self._counts[counter] += 1
                slots += self._holdings.release(execution_id, attempt)
            self._cond.notify_all()
        self.send_slots.give_back(slots)

    # -- the finalizer -------------------------------------------------------------------

    def recorded(self, results: Iterable[tuple[FinishedExecution, bool]]) -> None:
        """Each attempt of a batch was written (``applied``), or lost its compare-and-set
        (reclaimed meanwhile): either way none of them is held any more."""
        self._release_all(
            [
                (finished.execution_id, finished.attempt_number, log_finalized(finished, applied))
                for finished, applied in results
            ]
        )

    # -- draining ------------------------------------------------------------------------

    def wait_empty(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s until nothing is held."""
        deadline = self.clock() + timeout
        with self._cond:
            while len(self._holdings) > 0:
                left = deadline - self.clock()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.1))
        return True

    # -- the lease keeper ----------------------------------------------------------------

    def due_for_renewal(self) -> list[str]:
        with self._cond:
            return self._holdings.due_for_renewal()

    def renewed(self, asked: Iterable[str], kept: set[str], sent_at: float) -> list[str]:
        with self._cond:
            return self._holdings.renewed(asked, kept, sent_at)
