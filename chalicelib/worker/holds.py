"""What a worker holds: its slots, its per-endpoint shares and its leases.

A slot is held from the send until the attempt is recorded (finalized), not just while the
request is out: a worker sends at most its capacity before their attempts are recorded,
and a crash can redeliver at most that many. A claim may take the slots of attempts being
recorded (:meth:`Holds.claimable`), so it holds RUNNING at most one claim batch more, which
waits for those commits. Per endpoint,
the executions claimed and not yet delivered are capped (``spec.max_concurrent``, else
:attr:`Holds.default_cap`: every slot but a reserve while the endpoint alone has work, a
share of the capacity once another has work too), so a hung endpoint ties up at most all
but the reserve; the claim passes over endpoints at their cap. (That cap is one worker's;
an endpoint's ``flow_control.max_concurrency`` bounds all workers together:
:mod:`chalicelib.worker.flow`.)

Every held execution has a lease in the database (``executions.lease_expires_at``) that
:class:`LeaseKeeper` renews in one statement per round. Locally each hold keeps a
conservative deadline (measured from before the claim or renewal was sent, so it never
outlives the database's); a delivery whose deadline has passed is not sent.

Not thread-safe: the worker calls it under its own lock.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from chalicelib.db.connection import Database, Row, Transaction
from chalicelib.db.queries import queries
from chalicelib.errors import DatabaseError
from chalicelib.worker.claims import ClaimLimits
from chalicelib.worker.models import ClaimedExecution

log = logging.getLogger("chalicelib.worker")

#: A delivery is sent only if its lease has at least this share of a lease left (slack for
#: the time between the check and the request reaching the target, and for clock rates).
SEND_MARGIN_SHARE = 0.1
#: Leases are renewed once a third of a lease has passed: two renewal rounds can fail
#: before a live worker's lease runs out.
RENEW_SHARE = 1 / 3
#: The deadline of an execution a renewal found reclaimed.
LOST = float("-inf")
#: The share of a worker's slots that an endpoint alone with work may not take: kept for
#: any other endpoint whose work comes due (at least one slot).
RESERVE_SHARE = 0.2
#: How long after its last claim an endpoint still counts as having work.
CONTENTION_SEC = 1.0


@dataclass
class _Hold:
    endpoint: str
    attempt: int
    deadline: float  #: monotonic time at which the lease may have expired
    delivering: bool = True  #: claimed, delivery not finished
    slot: bool = False  #: delivered: holds a delivery slot until its attempt is recorded


class Holds:
    """Slots, per-endpoint shares and lease deadlines of one worker."""

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
        #: Its cap while it is the only endpoint with work: every slot but the reserve.
        self.burst_cap = max(default_cap, capacity - max(1, math.ceil(capacity * RESERVE_SHARE)))
        self.lease_sec = lease_sec
        self._clock = clock
        self._holds: dict[str, _Hold] = {}
        self._busy: Counter[str] = Counter()  # endpoint -> held and not yet delivered
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

    def _with_work(self) -> set[str]:
        """Endpoints delivering here now or claimed within :data:`CONTENTION_SEC`."""
        horizon = self._clock() - CONTENTION_SEC
        for name in [n for n, at in self._claimed_at.items() if at < horizon]:
            del self._claimed_at[name]
        return set(self._claimed_at) | {name for name, n in self._busy.items() if n > 0}

    def __len__(self) -> int:
        return len(self._holds)

    def claimable(self) -> int:
        """How many a claim may take now: the free slots and those of executions delivered
        and waiting for their attempt to be recorded (they free at the finalizer's next
        commit, milliseconds away), so a claim overlaps the commit instead of following it.

        None while a batch claimed that way still waits for slots (more held than the
        capacity): what a worker holds RUNNING stays within its capacity plus one claim
        batch, and the excess only waits for a commit in flight. Sends never exceed the
        capacity (the delivery loop's slots are released when an attempt is recorded).
        """
        if len(self._holds) > self.capacity:
            return 0
        return self.capacity - self._undelivered

    def cap(self, endpoint: str) -> int:
        """How many of ``endpoint``'s deliveries this worker runs at once."""
        return self._caps.get(endpoint, self.default_cap)

    def room(self, endpoint: str) -> int:
        """How many more of ``endpoint``'s executions the next claim may take."""
        return self.cap(endpoint) - self._busy[endpoint]

    def limits(self) -> ClaimLimits:
        """The next claim's lease and fairness: full endpoints and what each one holds."""
        busy = {name: n for name, n in self._busy.items() if n > 0}
        default = self.default_cap
        full = tuple(name for name, held in busy.items() if held >= self._caps.get(name, default))
        return ClaimLimits(
            lease_ms=int(self.lease_sec * 1000),
            default_cap=default,
            full=full,
            busy=busy,
        )

    def add(self, batch: Iterable[ClaimedExecution], sent_at: float) -> None:
        """Hold a claimed batch; ``sent_at``: monotonic time before the claim was sent."""
        deadline = sent_at + self.lease_sec
        for claimed in batch:
            older = self._holds.get(claimed.execution_id)
            if older is not None:  # a lost attempt's task has not ended yet
                self.delivered(claimed.execution_id, older.attempt)
            self._holds[claimed.execution_id] = _Hold(claimed.endpoint, claimed.attempt, deadline)
            self._busy[claimed.endpoint] += 1
            self._undelivered += 1
            self._claimed_at[claimed.endpoint] = self._clock()
            if claimed.endpoint_cap is None:
                self._caps.pop(claimed.endpoint, None)
            else:
                self._caps[claimed.endpoint] = claimed.endpoint_cap

    def delivered(self, execution_id: str, attempt: int, *, slot: bool = False) -> None:
        """The delivery ended (its result waits for the finalizer): the endpoint's share is
        free again; ``slot``: it was sent, and holds a delivery slot until released."""
        hold = self._holds.get(execution_id)
        if hold is not None and hold.attempt == attempt and hold.delivering:
            hold.delivering = False
            hold.slot = slot
            self._busy[hold.endpoint] -= 1
            self._undelivered -= 1

    def release(self, execution_id: str, attempt: int) -> bool:
        """Recorded, or left RUNNING for the reclaimer: no longer held, the lease no longer
        renewed; True if it held a delivery slot. Keyed by attempt too: a reclaimed
        execution may be claimed again by this worker before its lost attempt's task ends."""
        self.delivered(execution_id, attempt)
        hold = self._holds.get(execution_id)
        if hold is None or hold.attempt != attempt:
            return False
        del self._holds[execution_id]
        return hold.slot

    def owned(self, execution_id: str) -> bool:
        """True while the lease surely holds, with a margin for the send."""
        hold = self._holds.get(execution_id)
        margin = self.lease_sec * SEND_MARGIN_SHARE
        return hold is not None and self._clock() < hold.deadline - margin

    def due_for_renewal(self) -> list[str]:
        """Held executions whose lease is past a third of its length (not those lost)."""
        threshold = self._clock() + self.lease_sec * (1 - RENEW_SHARE)
        return [eid for eid, h in self._holds.items() if LOST < h.deadline <= threshold]

    def renewed(self, asked: Iterable[str], kept: set[str], sent_at: float) -> list[str]:
        """Apply a renewal round; returns the executions it found lost (reclaimed)."""
        lost = []
        for eid in asked:
            hold = self._holds.get(eid)
            if hold is None:
                continue
            if eid in kept:
                hold.deadline = sent_at + self.lease_sec
            else:
                hold.deadline = LOST  # never sent now; released when its task ends
                lost.append(eid)
        return lost


class LeaseKeeper:
    """A thread that renews the leases of what the worker holds, one statement per round."""

    def __init__(
        self,
        db: Database,
        worker_id: str,
        holds: Holds,
        lock: threading.Condition,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._db = db
        self._worker_id = worker_id
        self._holds = holds
        self._lock = lock
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def interval(self) -> float:
        """Seconds between rounds: a fraction of the share of a lease that triggers one."""
        return max(0.05, self._holds.lease_sec * RENEW_SHARE / 4)

    def start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="te-leases", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def renew_once(self) -> list[str]:
        """One round; returns the executions found lost."""
        with self._lock:
            ids = self._holds.due_for_renewal()
        if not ids:
            return []
        sent_at = self._clock()
        lease_ms = int(self._holds.lease_sec * 1000)

        def renew(tx: Transaction) -> list[Row]:
            # One guarded statement, sent alone, like the claim: safe to apply twice.
            sql = queries["worker_renew_leases"]
            return tx.run(sql, ids=ids, worker_id=self._worker_id, lease_ms=lease_ms)

        rows = self._db.transaction(renew, name="worker_renew_leases", single=True)
        with self._lock:
            lost = self._holds.renewed(ids, {row["execution_id"] for row in rows}, sent_at)
        if lost:
            log.warning("leases lost to the reclaimer; not sending %d executions", len(lost))
        return lost

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.renew_once()
            except DatabaseError as exc:
                log.warning("lease renewal failed; retrying next round", exc_info=exc)
