"""What a worker holds: its slots, its per-endpoint shares and its leases' deadlines.

:class:`Holdings` is the bookkeeping of the worker's :class:`~chalicelib.worker.ledger.Ledger`
(not thread-safe: the ledger calls it under its lock, and it is tested alone). Its clock is
injected (``time.monotonic`` unless told).

A slot is held from the send until the attempt is recorded (finalized), not just while the
request is out: a worker sends at most its capacity before their attempts are recorded,
and a crash can redeliver at most that many. A claim may take the slots of attempts being
recorded (:meth:`Holdings.claimable`), so it holds RUNNING at most one claim batch more,
which waits for those commits. Per endpoint, the executions claimed and not yet delivered
are capped (``spec.max_concurrent``, else :attr:`Holdings.default_cap`: every slot but a
reserve while the endpoint alone has work, a share of the capacity once another has work
too), and the endpoints together never take the reserve by claims of their own: while what
is in delivery fills every slot but the reserve, each endpoint is held to
:attr:`Holdings.entry_cap` (an endpoint's own ``spec.max_concurrent`` included), so hung
endpoints, however many, tie up at most all but the reserve and an endpoint with nothing in
delivery still finds room in it; the claim passes over endpoints at their cap. (That cap is
one worker's; an endpoint's ``flow_control.max_concurrency`` bounds all workers together:
:mod:`chalicelib.worker.flow`.)

Every held execution has a lease in the database (``executions.lease_expires_at``) that
:class:`~chalicelib.worker.leases.LeaseKeeper` renews in one statement per round. Locally
each holding keeps a conservative deadline (measured from before the claim or renewal was
sent, so it never outlives the database's); a delivery whose deadline has passed is not
sent.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from chalicelib.worker.models import ClaimedExecution
from chalicelib.worker.store import ClaimLimits

#: A delivery is sent only if its lease has at least this share of a lease left (slack for
#: the time between the check and the request reaching the target, and for clock rates).
SEND_MARGIN_SHARE = 0.1
#: Leases are renewed once a third of a lease has passed: two renewal rounds can fail
#: before a live worker's lease runs out.
RENEW_SHARE = 1 / 3
#: The deadline of an execution a renewal found reclaimed.
LOST = float("-inf")
#: The share of a worker's slots that the endpoints in delivery may not take by claims of
#: their own: kept for any other endpoint whose work comes due (at least one slot).
RESERVE_SHARE = 0.2
#: While the reserve is in use, an endpoint may hold this share of it (at least one slot):
#: a few endpoints that hang in the reserve too still leave room for the next one.
RESERVE_ENTRY_SHARE = 0.25
#: How long after its last claim an endpoint still counts as having work.
CONTENTION_SEC = 1.0


@dataclass
class _Holding:
    """One execution the worker holds, from its claim until its attempt is recorded."""

    endpoint: str
    attempt: int
    deadline: float  #: monotonic time at which the lease may have expired
    delivering: bool = True  #: claimed, delivery not finished
    slot: bool = False  #: delivered: holds a delivery slot until its attempt is recorded


class Holdings:
    """Slots, per-endpoint shares and lease deadlines of one worker (not thread-safe: the
    :class:`~chalicelib.worker.ledger.Ledger` calls it under its lock)."""

    def __init__(
        self,
        *,
        capacity: int,
        default_cap: int,
        lease_sec: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.capacity = capacity
        #: An endpoint's fair share (``TE_WORKER_ENDPOINT_SHARE`` of the capacity): its cap
        #: while other endpoints have work too.
        self.share_cap = default_cap
        #: Its cap while it is the only endpoint with work: every slot but the reserve. It is
        #: also what every endpoint in delivery may hold together (the ceiling of any cap,
        #: ``spec.max_concurrent`` included); a share of 1 leaves no reserve.
        self.burst_cap = max(default_cap, capacity - max(1, math.ceil(capacity * RESERVE_SHARE)))
        #: An endpoint's cap while the reserve is in use (:meth:`in_reserve`).
        self.entry_cap = max(1, int((capacity - self.burst_cap) * RESERVE_ENTRY_SHARE))
        self.lease_sec = lease_sec
        self._clock = clock
        self._holdings: dict[str, _Holding] = {}
        self._busy: Counter[str] = Counter()  # endpoint -> held and not yet delivered
        self._held: Counter[str] = Counter()  # endpoint -> held (until recorded)
        self._undelivered = 0
        self._caps: dict[str, int] = {}  # endpoint -> its spec.max_concurrent, if it sets one
        self._claimed_at: dict[str, float] = {}  # endpoint -> when a claim last took some

    @property
    def default_cap(self) -> int:
        """The cap of an endpoint without ``max_concurrent``: the fair share while two or
        more endpoints have work, else every slot but the reserve (work-conserving: a lone
        endpoint is not held to half the worker while nothing else waits). When another
        endpoint's work comes due, the next claim finds it in the reserve at once (the lone
        one is at its cap, so passed over) and from then on every endpoint is held to its
        share: the lone one claims nothing until it is below it, and the slots its ending
        deliveries free go to the others."""
        return self.burst_cap if len(self._with_work()) < 2 else self.share_cap

    def in_reserve(self, pending: int = 0) -> bool:
        """True while what is in delivery (with ``pending``: the room of claims in flight)
        fills every slot but the reserve: from then on each endpoint is held to
        :attr:`entry_cap`, so one that has nothing in delivery yet still gets a slot however
        many others hang."""
        return self.burst_cap < self.capacity and self._undelivered + pending >= self.burst_cap

    def _with_work(self) -> set[str]:
        """Endpoints delivering here now or claimed within :data:`CONTENTION_SEC`."""
        horizon = self._clock() - CONTENTION_SEC
        for name in [n for n, at in self._claimed_at.items() if at < horizon]:
            del self._claimed_at[name]
        return set(self._claimed_at) | {name for name, n in self._busy.items() if n > 0}

    def __len__(self) -> int:
        return len(self._holdings)

    @property
    def awaiting_record(self) -> int:
        """Held executions whose delivery has ended (sent, or finished unsent) and whose
        attempt is not yet recorded: the part of what a worker holds that waits for the
        finalizer's commit (the sent ones among them are what a crash would deliver
        again)."""
        return len(self._holdings) - self._undelivered

    def claimable(self) -> int:
        """How many a claim may take now: the free slots and those of executions delivered
        and waiting for their attempt to be recorded (they free at the finalizer's next
        commit, milliseconds away), so a claim overlaps the commit instead of following it.

        None while a batch claimed that way still waits for slots (more held than the
        capacity): what a worker holds RUNNING stays within its capacity plus one claim
        batch, and the excess only waits for a commit in flight. Sends never exceed the
        capacity (the delivery loop's slots are released when an attempt is recorded).
        """
        if len(self._holdings) > self.capacity:
            return 0
        return self.capacity - self._undelivered

    def free(self) -> int:
        """Slots no execution holds (never more than :meth:`claimable`)."""
        return max(0, self.capacity - len(self._holdings))

    def usable(self, room: int, *, recording: bool) -> int:
        """How much of ``room`` the endpoints with work here may still take (while none has
        work, any endpoint's due work may, up to every slot but the reserve). The rest is the
        reserve, which only other endpoints' work may take. ``recording``: the claim counts
        the slots of attempts being recorded, so an endpoint's room is its cap less what is
        in delivery; else (the refill takes those slots, PostgreSQL) less everything it
        holds."""
        room = min(room, self.batch(room))
        with_work = self._with_work()
        if not with_work:
            return room
        counts = self._busy if recording else self._held
        return min(room, sum(max(0, self.cap(name) - counts[name]) for name in with_work))

    def batch(self, room: int, pending: int = 0) -> int:
        """The most the next claim may take of ``room`` (``pending``: the room of claims in
        flight): no more than leaves the reserve free, or while it is in use
        (:meth:`in_reserve`) no more than :attr:`entry_cap`, so one claim never hands the
        whole reserve to one endpoint."""
        if self.in_reserve(pending):
            return min(room, self.entry_cap)
        return min(room, self.burst_cap - self._undelivered - pending)

    def cap(self, endpoint: str, pending: int = 0) -> int:
        """How many of ``endpoint``'s deliveries this worker runs at once: its
        ``spec.max_concurrent`` or the default, never more than every slot but the reserve,
        nor more than :attr:`entry_cap` while the reserve is in use."""
        ceiling = self.entry_cap if self.in_reserve(pending) else self.burst_cap
        return min(self._caps.get(endpoint, self.default_cap), ceiling)

    def room(self, endpoint: str) -> int:
        """How many more of ``endpoint``'s executions the next claim may take."""
        return self.cap(endpoint) - self._busy[endpoint]

    def limits(self, pending: int = 0) -> ClaimLimits:
        """The next claim's lease and fairness: full endpoints and what each one holds
        (``pending``: the room of claims in flight, which may fill the main slots)."""
        busy = {name: n for name, n in self._busy.items() if n > 0}
        default = self.entry_cap if self.in_reserve(pending) else self.default_cap
        full = tuple(name for name, held in busy.items() if held >= self.cap(name, pending))
        return ClaimLimits(
            lease_ms=int(self.lease_sec * 1000),
            default_cap=default,
            full=full,
            busy=busy,
            pending=pending,
        )

    def add(self, batch: Iterable[ClaimedExecution], sent_at: float) -> None:
        """Hold a claimed batch; ``sent_at``: monotonic time before the claim was sent."""
        deadline = sent_at + self.lease_sec
        for claimed in batch:
            older = self._holdings.get(claimed.execution_id)
            if older is not None:  # a lost attempt's task has not ended yet
                self.delivered(claimed.execution_id, older.attempt)
                self._held[older.endpoint] -= 1
            self._holdings[claimed.execution_id] = _Holding(
                claimed.endpoint, claimed.attempt, deadline
            )
            self._busy[claimed.endpoint] += 1
            self._held[claimed.endpoint] += 1
            self._undelivered += 1
            self._claimed_at[claimed.endpoint] = self._clock()
            if claimed.endpoint_cap is None:
                self._caps.pop(claimed.endpoint, None)
            else:
                self._caps[claimed.endpoint] = claimed.endpoint_cap

    def delivered(self, execution_id: str, attempt: int, *, slot: bool = False) -> None:
        """The delivery ended (its result waits for the finalizer): the endpoint's share is
        free again; ``slot``: it was sent, and holds a delivery slot until released."""
        holding = self._holdings.get(execution_id)
        if holding is not None and holding.attempt == attempt and holding.delivering:
            holding.delivering = False
            holding.slot = slot
            self._busy[holding.endpoint] -= 1
            self._undelivered -= 1

    def release(self, execution_id: str, attempt: int) -> bool:
        """Recorded, or left RUNNING for the reclaimer: no longer held, the lease no longer
        renewed; True if it held a delivery slot. Keyed by attempt too: a reclaimed
        execution may be claimed again by this worker before its lost attempt's task ends."""
        self.delivered(execution_id, attempt)
        holding = self._holdings.get(execution_id)
        if holding is None or holding.attempt != attempt:
            return False
        del self._holdings[execution_id]
        self._held[holding.endpoint] -= 1
        return holding.slot

    def owned(self, execution_id: str) -> bool:
        """True while the lease surely holds, with a margin for the send."""
        holding = self._holdings.get(execution_id)
        margin = self.lease_sec * SEND_MARGIN_SHARE
        return holding is not None and self._clock() < holding.deadline - margin

    def due_for_renewal(self) -> list[str]:
        """Held executions whose lease is past a third of its length (not those lost)."""
        threshold = self._clock() + self.lease_sec * (1 - RENEW_SHARE)
        return [eid for eid, h in self._holdings.items() if LOST < h.deadline <= threshold]

    def renewed(self, asked: Iterable[str], kept: set[str], sent_at: float) -> list[str]:
        """Apply a renewal round; returns the executions it found lost (reclaimed)."""
        lost = []
        for eid in asked:
            holding = self._holdings.get(eid)
            if holding is None:
                continue
            if eid in kept:
                holding.deadline = sent_at + self.lease_sec
            else:
                holding.deadline = LOST  # never sent now; released when its task ends
                lost.append(eid)
        return lost
