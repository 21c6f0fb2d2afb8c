"""The ledger: the worker's holdings under one lock, the wait for room, the releases.

Its clock is the tests' :class:`FakeClock`: a wait for room decides on that clock, and a
wait that waits is woken as a slot freeing wakes it (:func:`wait_woken`), never slept.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from datetime import UTC, datetime

from chalicelib.domain.statuses import AttemptStatus, ExecutionStatus
from chalicelib.worker.holdings import Holdings
from chalicelib.worker.ledger import CLAIM_LINGER_SEC, Ledger
from chalicelib.worker.models import FinishedExecution
from chalicelib.worker.send_slots import SendSlots
from tests.support.clock import FakeClock
from tests.support.seed.worker import claimed_execution as claimed

#: Where the ledger's clock starts (the tests' hand-outs are at 100).
START = 100.0


def ledger_of(
    capacity: int, default_cap: int, clock: FakeClock | None = None, slots: SendSlots | None = None
) -> tuple[Ledger, Holdings]:
    """A ledger and its holdings on one fake clock (at :data:`START` unless given)."""
    ticking = clock or FakeClock(monotonic_start=START)
    holdings = Holdings(
        capacity=capacity, default_cap=default_cap, lease_sec=30, clock=ticking.monotonic
    )
    ledger = Ledger(
        holdings, slots or SendSlots(capacity), wake=lambda: None, clock=ticking.monotonic
    )
    return ledger, holdings


def wait_woken(
    ledger: Ledger,
    clock: FakeClock,
    steps: Iterable[float],
    poll_interval: float = 30.0,
    *,
    recording: bool = True,
) -> tuple[bool, int]:
    """``ledger.wait_for_room`` on the fake clock: at each look the clock moves on by the
    next of ``steps``, and a wait that follows is woken as a slot freeing wakes it (a
    release); once the steps are spent the claimer says stop. Returns (what the wait
    returned, how many looks moved the clock).

    No time is slept: a look happens under the ledger's lock, so the release that wakes
    the wait gets the lock only once the wait waits."""
    remaining = list(steps)
    count = len(remaining)
    looked = threading.Semaphore(0)
    looks = 0

    def stopping() -> bool:
        nonlocal looks
        if not remaining:
            return True
        clock.advance(remaining.pop(0))
        looks += 1
        looked.release()
        return False

    result: list[bool] = []
    waiter = threading.Thread(
        target=lambda: result.append(
            ledger.wait_for_room(stopping, poll_interval, recording=recording)
        )
    )
    waiter.start()
    for _ in range(count):
        if not looked.acquire(timeout=5):
            break
        ledger.release("nothing-held", 1)  # wakes the wait, as any release does
    waiter.join(5)
    assert not waiter.is_alive()
    return result[0], looks


def test_room_reserved_by_claims_in_flight_comes_off_the_room_and_every_share() -> None:
    ledger, h = ledger_of(4, 2)
    h.add([claimed("e1", "a")], 100)
    assert ledger.room(())[0] == 2  # the fourth slot is the reserve
    room, limits = ledger.room((), pending=2)
    assert (room, limits.pending, limits.params()["pending"]) == (1, 2, 2)
    assert ledger.room((), pending=3)[0] == 0


def test_a_batch_worth_claiming_is_claimed_at_once_and_less_after_the_linger() -> None:
    """A quarter of the capacity free: claimed at the first look. One slot free: claimed
    once it has lingered (:data:`CLAIM_LINGER_SEC`) for more to free, not before."""
    clock = FakeClock(monotonic_start=START)
    ledger, h = ledger_of(8, 8, clock)  # a share of 1: no reserve
    assert wait_woken(ledger, clock, [0]) == (True, 1)
    h.add([claimed(f"e{i}", "a") for i in range(7)], 100)  # one slot free
    assert wait_woken(ledger, clock, [0, CLAIM_LINGER_SEC / 2]) == (False, 2)
    assert wait_woken(ledger, clock, [0, CLAIM_LINGER_SEC * 1.5]) == (True, 2)


def test_the_claimers_loop_leaves_the_recording_slots_to_the_refill() -> None:
    """Where the finalizer claims in the statement that records (PostgreSQL), the claimer's
    own loop takes only free slots; the refill takes those the record frees as well."""
    clock = FakeClock(monotonic_start=START)
    ledger, h = ledger_of(4, 4, clock)  # share 1: no reserve
    h.add([claimed("e1", "a"), claimed("e2", "a")], 100)
    h.delivered("e1", 1, slot=True)  # its attempt is being recorded
    assert ledger.room((), recording=False)[0] == 2  # the two free slots only
    assert ledger.room((), recording=True)[0] == 3  # and the one its record frees
    h.add([claimed("e3", "a"), claimed("e4", "a")], 100)  # every slot held, one recording
    assert (ledger.room((), recording=False)[0], ledger.room((), recording=True)[0]) == (0, 1)
    # No free slot: the loop waits (until stopped); counting the recording one, it claims.
    assert wait_woken(ledger, clock, [0, 60], recording=False) == (False, 2)
    assert wait_woken(ledger, clock, [0]) == (True, 1)  # a batch's worth (1 of 4)


def test_the_claimers_loop_looks_in_the_reserve_at_the_poll_interval_or_when_work_is_queued() -> (
    None
):
    """A lone endpoint at its cap: the loop does not claim on every slot that frees (a
    claim of its own for what the finalizer's refill fills), but once a poll interval, or
    at once when a notification says work was queued (which the reserve is for)."""
    clock = FakeClock(monotonic_start=START)
    ledger, h = ledger_of(50, 25, clock)
    h.add([claimed(f"a{i}", "busy") for i in range(40)], 100)
    # Woken three times within the poll interval: it is still only the reserve.
    assert wait_woken(ledger, clock, [0, 10, 19.9], recording=False) == (False, 3)
    # A poll interval into the wait it looks.
    assert wait_woken(ledger, clock, [0, 10, 20], recording=False) == (True, 3)
    # A notification makes it look at once.
    ledger.nudge()
    assert wait_woken(ledger, clock, [0], recording=False) == (True, 1)
    # Room of its own again (a delivery recorded): claimed after the linger, as before.
    h.delivered("a0", 1, slot=True)
    h.release("a0", 1)
    assert wait_woken(ledger, clock, [0, CLAIM_LINGER_SEC * 1.5], recording=False) == (True, 2)


def test_waiting_for_the_ledger_to_empty_ends_with_the_last_release_or_the_timeout() -> None:
    ledger, h = ledger_of(4, 4)
    h.add([claimed("e1", "a")], 100)
    assert not ledger.wait_empty(0)  # the clock does not move: the timeout is spent at once
    ledger.release("e1", 1)
    assert ledger.wait_empty(0)


class CountingSlots(SendSlots):
    """Send slots that count what is given back."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self.given: list[int] = []

    def give_back(self, count: int = 1) -> None:
        self.given.append(count)


def finished(execution_id: str, endpoint: str) -> FinishedExecution:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    return FinishedExecution(
        execution_id=execution_id,
        endpoint=endpoint,
        attempt_number=1,
        attempt_status=AttemptStatus.SUCCESS,
        next_status=ExecutionStatus.SUCCESS,
        started_at=at,
        completed_at=at,
        duration_ms=1,
    )


def test_a_recorded_batch_is_released_in_one_step() -> None:
    """The finalizer's batch leaves the ledger at once: each counted under its outcome (a
    result that lost its compare-and-set under none), and the send slots of those that
    were sent given back to the delivery loop in one call."""
    slots = CountingSlots(4)
    ledger, h = ledger_of(4, 2, slots=slots)
    h.add([claimed("e1", "a"), claimed("e2", "a"), claimed("e3", "b")], 100)
    h.delivered("e1", 1, slot=True)
    h.delivered("e2", 1, slot=True)
    h.delivered("e3", 1, slot=False)  # finished without a send: no send slot
    ledger.recorded(
        [(finished("e1", "a"), True), (finished("e2", "a"), False), (finished("e3", "b"), True)]
    )
    assert len(h) == 0
    assert slots.given == [2]
    assert ledger.counts()["succeeded"] == 2


def _claim_as_the_sql_does(ledger: Ledger, due: list[tuple[str, str, int | None]]) -> list[str]:
    """One claim the way the "fair" part (parts.sql) takes it: the oldest due rows, per endpoint
    at most its cap (spec.max_concurrent, else the limits' default) less what it has in
    delivery, none of an endpoint in ``full``, at most the room; held in the ledger."""
    room, limits = ledger.room(())
    taken: list[tuple[str, str, int | None]] = []
    for row in due:
        _, endpoint, cap = row
        own = sum(1 for t in taken if t[1] == endpoint)
        allowed = (cap if cap is not None else limits.default_cap) - limits.busy.get(endpoint, 0)
        if len(taken) < room and endpoint not in limits.full and own < allowed:
            taken.append(row)
    for row in taken:
        due.remove(row)
    ledger.take([claimed(eid, endpoint, cap=cap) for eid, endpoint, cap in taken], 100)
    return [endpoint for _, endpoint, _ in taken]


def test_hung_endpoints_together_leave_the_reserve_to_one_that_comes_due_later() -> None:
    """Three endpoints whose targets hang (40 due each, claimed as they fall due) never
    hold more than every slot but the reserve between them: a fourth one's work, due last,
    is claimed at its first claim (no delivery ends meanwhile)."""
    ledger, h = ledger_of(50, 25)
    due = [(f"{name}-{i}", name, None) for name in ("h1", "h2", "h3") for i in range(40)]
    for _ in range(20):  # claim after claim, as the worker does while nothing ends
        _claim_as_the_sql_does(ledger, due)
    assert len(h) <= 50 - 10 + 2 * 2  # the hung ones: all but the reserve, and 2 slices of it
    due.append(("late-0", "late", None))
    assert _claim_as_the_sql_does(ledger, due) == ["late"]


def test_max_concurrent_never_takes_the_reserve() -> None:
    """An endpoint whose spec.max_concurrent is above the worker's capacity is held, like
    any other, to every slot but the reserve, and to a slice of it while it is in use."""
    ledger, h = ledger_of(50, 25)
    due = [(f"big-{i}", "big", 10_000) for i in range(100)]
    assert _claim_as_the_sql_does(ledger, due) == ["big"] * 40
    assert h.cap("big") == h.entry_cap and h.limits().full == ("big",)
    assert _claim_as_the_sql_does(ledger, due) == []  # it alone: the reserve stays free
    due.insert(0, ("other-0", "other", None))
    assert _claim_as_the_sql_does(ledger, due) == ["other"]
