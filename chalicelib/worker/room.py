"""Room reservation: the one place a claim's room is sized, reserved and given back.

Claims may run side by side: the claimer's own, and each finalizer writer's refill (a
writer whose batch ends while another one's statement runs refills its slots too, rather
than leaving them to a claim of their own). Each reserves its room before it is sent
(:meth:`Room.reserve`, :meth:`Room.reserve_refill`) and gives the reservation back when
what it took is held (:meth:`Room.settle`), in one step under one lock, so the room is
never counted twice nor missed in between. A claim sized meanwhile leaves the reserved room
out, in total and from every endpoint's share (``ClaimLimits.pending``), so the slots and
the shares are never claimed twice.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

from chalicelib.worker.ledger import Ledger
from chalicelib.worker.models import ClaimedExecution
from chalicelib.worker.store import ClaimPlan

__all__ = ["ClaimPlan", "Exclusions", "Room"]


class Exclusions(Protocol):
    """The endpoints a claim leaves out (:class:`chalicelib.worker.flow.Controls`)."""

    @property
    def excluded(self) -> tuple[str, ...]:
        """Paused, held or flow-controlled, as the worker last read them."""
        ...


class Room:
    """The worker's claim room: what claims in flight reserved, and the hold of what they
    took (thread-safe)."""

    def __init__(self, ledger: Ledger, exclusions: Exclusions) -> None:
        self._ledger = ledger
        self._exclusions = exclusions
        #: Guards :attr:`_pending` and the hold of what a claim took: room and reservations
        #: are read and changed together.
        self._lock = threading.Lock()
        self._pending = 0  #: room reserved by claims in flight
        #: Set while the claimer runs (:meth:`refilling`): refills are reserved only then.
        self._stopping: Callable[[], bool] | None = None

    def wait(self, stopping: Callable[[], bool], poll_interval: float, recording: bool) -> bool:
        """Block until a claim is worth making (:meth:`Ledger.wait_for_room`); False if
        ``stopping()`` said stop meanwhile."""
        return self._ledger.wait_for_room(stopping, poll_interval, recording=recording)

    def reserve(self, *, recording: bool) -> ClaimPlan | None:
        """The room for a claim about to be sent (``recording``: counting the slots of
        attempts being recorded), less what the claims in flight reserved, and reserved in
        turn until :meth:`settle`; None if there is none. Its limits take the reserved room
        from every endpoint's share: a claim in flight may take its whole room from any of
        them. Never waits (but for the lock)."""
        with self._lock:
            room, limits = self._ledger.room(
                self._exclusions.excluded, recording=recording, pending=self._pending
            )
            if room <= 0:
                return None
            self._pending += room
        return ClaimPlan(room, limits, self._ledger.clock())

    def reserve_refill(self) -> ClaimPlan | None:
        """:meth:`reserve` for a refill where the finalizer records (its statement or
        transaction), counting the slots of attempts being recorded; None unless the
        claimer runs and is not stopping."""
        stopping = self._stopping
        if stopping is None or stopping():
            return None
        return self.reserve(recording=True)

    def settle(self, plan: ClaimPlan, batch: list[ClaimedExecution]) -> None:
        """A reserved claim ended (``batch``: what its commit took, empty if it failed):
        what it took is held and its reservation given back in one step."""
        with self._lock:
            self._pending -= plan.room
            if batch:
                self._ledger.take(batch, plan.started)

    @contextmanager
    def refilling(self, stopping: Callable[[], bool]) -> Iterator[None]:
        """While the claimer runs: refills are reserved until ``stopping()`` says stop."""
        self._stopping = stopping
        try:
            yield
        finally:
            self._stopping = None
