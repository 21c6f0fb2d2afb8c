"""Pause and flow control on the worker's side: which endpoints the fast claim
leaves alone, and the metered claim that serves flow-controlled endpoints.

The fast claim (:mod:`chalicelib.worker.strategies`) is the hot path and stays as it was for
endpoints without flow control: its endpoints join also passes over endpoints that are
paused, held by a ``Retry-After`` or flow-controlled, which costs a column test on a row it
already reads. To keep those endpoints' backlog out of its LIMIT (a paused endpoint's
oldest executions would otherwise fill every claim and starve the rest), each worker reads
them once per poll interval (:class:`Controls`, one small indexed query) and passes them
with the endpoints at their share.

Flow-controlled endpoints are claimed by the store's metered claim
(:meth:`~chalicelib.worker.store.WorkerStore.claim_metered`; on PostgreSQL
:class:`~chalicelib.worker.strategies.MeteredClaim`), in a transaction of three
statements that only exists when such endpoints do: lock and refill their cluster-wide
state (``endpoint_flow``), claim within the rate limit's tokens and ``max_concurrency``,
debit the tokens taken. The lock serializes the metered claims of an endpoint across all
workers, so neither limit can be overspent by two workers claiming at once; the cost is
per claim (a batch), never per delivery.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from chalicelib.worker.store import Controlled

#: Metered claims of one worker are at least this far apart (seconds), and an idle worker
#: polls at least this often while flow-controlled endpoints exist: tokens are granted in
#: batches of ~rate x interval, and a small bucket (limit over a short period) is not left
#: full, losing its refill, for a whole poll interval.
METERED_INTERVAL = 0.05


class ControlledEndpoints(Protocol):
    """Where the controlled endpoints are read (the worker's
    :class:`~chalicelib.worker.store.WorkerStore`)."""

    def controlled(self) -> Controlled: ...


class Controls:
    """The endpoints this worker keeps out of its fast claim, read once per poll interval."""

    def __init__(
        self,
        store: ControlledEndpoints,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self.interval = interval  #: the poll interval: how often they are read
        self._clock = clock
        self._next_read = 0.0
        self._next_metered = 0.0
        self.excluded: tuple[str, ...] = ()  #: paused, held or flow-controlled
        self.metered: tuple[str, ...] = ()  #: flow-controlled (sorted: the lock order)

    def refresh(self, *, force: bool = False) -> None:
        """Re-read the controlled endpoints if the last read is a poll interval old."""
        now = self._clock()
        if not force and now < self._next_read:
            return
        controlled = self._store.controlled()
        self._next_read = now + self.interval
        self.excluded = controlled.excluded
        self.metered = controlled.metered

    def metered_due(self) -> tuple[str, ...]:
        """The flow-controlled endpoints, if a metered claim is due now (else empty)."""
        now = self._clock()
        if not self.metered or now < self._next_metered:
            return ()
        self._next_metered = now + METERED_INTERVAL
        return self.metered

    def idle_sleep(self, poll_interval: float) -> float:
        """How long an idle worker sleeps: shorter while metered claims are to be made."""
        return min(poll_interval, METERED_INTERVAL) if self.metered else poll_interval
