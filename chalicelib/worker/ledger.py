"""The worker's ledger: its slots, its per-endpoint shares and its leases.

Every stage of the worker's ring (:mod:`chalicelib.worker.ring`) writes what it did here
and nowhere else: the claimer holds what it claimed, the delivery loop marks a delivery
ended (or lost), the finalizer releases what it recorded. :class:`Ledger` is that record,
thread-safe, with the condition the claimer waits on for room; :class:`Claims` is its
bookkeeping (not thread-safe, tested alone); :class:`SendSlots` gates the sends on the
delivery loop; :class:`LeaseKeeper` renews the leases of what is held.

A slot is held from the send until the attempt is recorded (finalized), not just while the
request is out: a worker sends at most its capacity before their attempts are recorded,
and a crash can redeliver at most that many. A claim may take the slots of attempts being
recorded (:meth:`Claims.claimable`), so it holds RUNNING at most one claim batch more, which
waits for those commits. Per endpoint,
the executions claimed and not yet delivered are capped (``spec.max_concurrent``, else
:attr:`Claims.default_cap`: every slot but a reserve while the endpoint alone has work, a
share of the capacity once another has work too), and the endpoints together never take
the reserve by claims of their own: while what is in delivery fills every slot but the
reserve, each endpoint is held to :attr:`Claims.entry_cap` (an endpoint's own
``spec.max_concurrent`` included), so hung endpoints, however many, tie up at most all but
the reserve and an endpoint with nothing in delivery still finds room in it; the claim
passes over endpoints at their cap. (That cap is one worker's; an endpoint's
``flow_control.max_concurrency`` bounds all workers together: :mod:`chalicelib.worker.flow`.)

Every held execution has a lease in the database (``executions.lease_expires_at``) that
:class:`LeaseKeeper` renews in one statement per round. Locally each claim keeps a
conservative deadline (measured from before the claim or renewal was sent, so it never
outlives the database's); a delivery whose deadline has passed is not sent.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from chalicelib.db.connection import Database, Row, Transaction
from chalicelib.db.queries import queries
from chalicelib.errors import DatabaseError
from chalicelib.worker.claims import ClaimLimits
from chalicelib.worker.models import ClaimedExecution, FinishedExecution
from chalicelib.worker.reporting import log_finalized

log = logging.getLogger("chalicelib.worker")

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
#: Claim once at least 1/MIN_BATCH_SHARE of the capacity is free (or after
#: CLAIM_LINGER_SEC): fewer, larger claims mean fewer commits per delivered execution.
MIN_BATCH_SHARE = 4
CLAIM_LINGER_SEC = 0.002


@dataclass
class _Claim:
    endpoint: str
    attempt: int
    deadline: float  #: monotonic time at which the lease may have expired
    delivering: bool = True  #: claimed, delivery not finished
    slot: bool = False  #: delivered: holds a delivery slot until its attempt is recorded


class Claims:
    """Slots, per-endpoint shares and lease deadlines of one worker (not thread-safe: the
    :class:`Ledger` calls it under its lock)."""

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
        self._claims: dict[str, _Claim] = {}
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
        return len(self._claims)

    @property
    def awaiting_record(self) -> int:
        """Held executions whose delivery has ended (sent, or finished unsent) and whose
        attempt is not yet recorded: the part of what a worker holds that waits for the
        finalizer's commit (the sent ones among them are what a crash would deliver
        again)."""
        return len(self._claims) - self._undelivered

    def claimable(self) -> int:
        """How many a claim may take now: the free slots and those of executions delivered
        and waiting for their attempt to be recorded (they free at the finalizer's next
        commit, milliseconds away), so a claim overlaps the commit instead of following it.

        None while a batch claimed that way still waits for slots (more held than the
        capacity): what a worker holds RUNNING stays within its capacity plus one claim
        batch, and the excess only waits for a commit in flight. Sends never exceed the
        capacity (the delivery loop's slots are released when an attempt is recorded).
        """
        if len(self._claims) > self.capacity:
            return 0
        return self.capacity - self._undelivered

    def free(self) -> int:
        """Slots no execution holds (never more than :meth:`claimable`)."""
        return max(0, self.capacity - len(self._claims))

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
            older = self._claims.get(claimed.execution_id)
            if older is not None:  # a lost attempt's task has not ended yet
                self.delivered(claimed.execution_id, older.attempt)
                self._held[older.endpoint] -= 1
            self._claims[claimed.execution_id] = _Claim(claimed.endpoint, claimed.attempt, deadline)
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
        claim = self._claims.get(execution_id)
        if claim is not None and claim.attempt == attempt and claim.delivering:
            claim.delivering = False
            claim.slot = slot
            self._busy[claim.endpoint] -= 1
            self._undelivered -= 1

    def release(self, execution_id: str, attempt: int) -> bool:
        """Recorded, or left RUNNING for the reclaimer: no longer held, the lease no longer
        renewed; True if it held a delivery slot. Keyed by attempt too: a reclaimed
        execution may be claimed again by this worker before its lost attempt's task ends."""
        self.delivered(execution_id, attempt)
        claim = self._claims.get(execution_id)
        if claim is None or claim.attempt != attempt:
            return False
        del self._claims[execution_id]
        self._held[claim.endpoint] -= 1
        return claim.slot

    def owned(self, execution_id: str) -> bool:
        """True while the lease surely holds, with a margin for the send."""
        claim = self._claims.get(execution_id)
        margin = self.lease_sec * SEND_MARGIN_SHARE
        return claim is not None and self._clock() < claim.deadline - margin

    def due_for_renewal(self) -> list[str]:
        """Held executions whose lease is past a third of its length (not those lost)."""
        threshold = self._clock() + self.lease_sec * (1 - RENEW_SHARE)
        return [eid for eid, h in self._claims.items() if LOST < h.deadline <= threshold]

    def renewed(self, asked: Iterable[str], kept: set[str], sent_at: float) -> list[str]:
        """Apply a renewal round; returns the executions it found lost (reclaimed)."""
        lost = []
        for eid in asked:
            claim = self._claims.get(eid)
            if claim is None:
                continue
            if eid in kept:
                claim.deadline = sent_at + self.lease_sec
            else:
                claim.deadline = LOST  # never sent now; released when its task ends
                lost.append(eid)
        return lost


class SendSlots:
    """The delivery loop's gate: at most ``capacity`` executions sent and not yet recorded
    (what a crash could deliver twice). Taken on the delivery loop before a send, given
    back by the ledger when attempts are recorded (from any thread, a batch at a time).

    A counter and a queue of waiters, first come first served: a freed slot goes straight
    to the oldest waiter. (``asyncio.Semaphore`` of Python 3.11 walks its waiters on every
    acquire once any wait: about 4 % of the worker's Python time in a profile at 50 slots.)
    """

    def __init__(self, capacity: int) -> None:
        self._free = capacity
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def acquire(self) -> None:
        """Wait for a slot, first come first served (on the delivery loop)."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return
        waiter = self._loop.create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._hand_on(1)  # handed a slot it will not use: the next one takes it
            raise

    def give_back(self, count: int = 1) -> None:
        """``count`` slots are free again: on the loop itself, or from another thread (one
        wake-up of the loop for the whole batch)."""
        loop = self._loop
        if loop is None or count <= 0:
            return  # nothing was ever taken
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._hand_on(count)
        elif not loop.is_closed():
            loop.call_soon_threadsafe(self._hand_on, count)

    def _hand_on(self, count: int) -> None:
        """On the loop: each freed slot to the oldest live waiter, the rest counted free."""
        waiters = self._waiters
        while count and waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                count -= 1
        self._free += count


class Ledger:
    """The ring's one record of what the worker holds (thread-safe).

    * the claimer: :meth:`wait_for_room`, :meth:`room`, :meth:`take`;
    * the delivery loop: :meth:`owned` before a send, :meth:`delivered` after it,
      :meth:`release` for one it could not finish;
    * the finalizer: :meth:`recorded` once a batch's attempts are written;
    * the lease keeper: :meth:`due_for_renewal` and :meth:`renewed`.

    ``wake`` ends the claimer's idle sleep: called when an endpoint that was at its share
    gets room again (its backlog may be all that is due).

    A claim's room either takes the slots of attempts being recorded (``recording``: they
    free at the finalizer's next commit, :meth:`Claims.claimable`), or only free slots
    (:meth:`Claims.free`): the claimer's own loop leaves the recording slots to the refill
    where the finalizer claims in the statement that records (PostgreSQL).
    """

    def __init__(self, claims: Claims, send_slots: SendSlots, wake: Callable[[], None]) -> None:
        self._claims = claims
        self.send_slots = send_slots
        self._wake = wake
        self._cond = threading.Condition()
        self._full: frozenset[str] = frozenset()  # endpoints at their share, last claim
        self._nudged = False  # work was queued: look in the reserve at once
        self._counts = {"claimed": 0, "succeeded": 0, "retrying": 0, "failed": 0}

    @property
    def capacity(self) -> int:
        return self._claims.capacity

    @property
    def lease_sec(self) -> float:
        return self._claims.lease_sec

    def __len__(self) -> int:
        with self._cond:
            return len(self._claims)

    def counts(self) -> dict[str, int]:
        """Executions claimed and finalized (by outcome) since the worker started."""
        with self._cond:
            return dict(self._counts)

    def occupancy(self) -> tuple[int, int]:
        """(executions held, of those the ones whose attempts wait to be recorded), read
        together so the second never exceeds the first."""
        with self._cond:
            return len(self._claims), self._claims.awaiting_record

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
        min_batch = max(1, self._claims.capacity // MIN_BATCH_SHARE)
        started = time.monotonic()
        linger_until = started + CLAIM_LINGER_SEC
        probe_at = started + poll_interval
        with self._cond:
            while not stopping():
                room = self._room(recording)
                usable = self._claims.usable(room, recording=recording)
                now = time.monotonic()
                if usable >= min_batch or (usable > 0 and now >= linger_until):
                    return True
                if room > usable and (self._nudged or now >= probe_at):
                    self._nudged = False
                    return True
                if usable > 0:
                    timeout = linger_until - now
                elif room > 0:
                    timeout = probe_at - now
                else:
                    timeout = poll_interval
                self._cond.wait(max(timeout, 0.0))
        return False

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
            limits = dataclasses.replace(self._claims.limits(pending), excluded=excluded)
            self._full = frozenset(limits.full)
            return self._claims.batch(self._room(recording) - pending, pending), limits

    def _room(self, recording: bool) -> int:
        return self._claims.claimable() if recording else self._claims.free()

    def take(self, batch: list[ClaimedExecution], sent_at: float) -> None:
        """A claim committed: keep what it took (``sent_at``: before the claim was sent)."""
        with self._cond:
            self._claims.add(batch, sent_at)
            self._counts["claimed"] += len(batch)

    # -- the delivery loop ---------------------------------------------------------------

    def owned(self, execution_id: str) -> bool:
        """Asked just before a send: the lease still surely holds."""
        with self._cond:
            return self._claims.owned(execution_id)

    def delivered(self, finished: FinishedExecution, *, sent: bool) -> None:
        """Its delivery ended (or it finished without one): the endpoint's share is free;
        ``sent``: it holds a send slot until its attempt is recorded."""
        with self._cond:
            self._claims.delivered(finished.execution_id, finished.attempt_number, slot=sent)
            endpoint = finished.endpoint
            wake = endpoint in self._full and self._claims.room(endpoint) >= max(
                1, self._claims.cap(endpoint) // MIN_BATCH_SHARE
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
                slots += self._claims.release(execution_id, attempt)
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
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self._claims) > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.1))
        return True

    # -- the lease keeper ----------------------------------------------------------------

    def due_for_renewal(self) -> list[str]:
        with self._cond:
            return self._claims.due_for_renewal()

    def renewed(self, asked: Iterable[str], kept: set[str], sent_at: float) -> list[str]:
        with self._cond:
            return self._claims.renewed(asked, kept, sent_at)


class LeaseKeeper:
    """A thread that renews the leases of what the ledger holds, one statement per round."""

    def __init__(
        self,
        db: Database,
        worker_id: str,
        ledger: Ledger,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._db = db
        self._worker_id = worker_id
        self._ledger = ledger
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def interval(self) -> float:
        """Seconds between rounds: a fraction of the share of a lease that triggers one."""
        return max(0.05, self._ledger.lease_sec * RENEW_SHARE / 4)

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
        ids = self._ledger.due_for_renewal()
        if not ids:
            return []
        sent_at = self._clock()
        lease_ms = int(self._ledger.lease_sec * 1000)

        def renew(tx: Transaction) -> list[Row]:
            # One guarded statement, sent alone, like the claim: safe to apply twice.
            sql = queries["worker_renew_leases"]
            return tx.run(sql, ids=ids, worker_id=self._worker_id, lease_ms=lease_ms)

        rows = self._db.transaction(renew, name="worker_renew_leases", single=True)
        lost = self._ledger.renewed(ids, {row["execution_id"] for row in rows}, sent_at)
        if lost:
            log.warning("leases lost to the reclaimer; not sending %d executions", len(lost))
        return lost

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.renew_once()
            except DatabaseError as exc:
                log.warning("lease renewal failed; retrying next round", exc_info=exc)
