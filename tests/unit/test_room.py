"""The room claims reserve: sized, reserved and given back in one place, for the claimer's
own claims and the finalizer's refills alike."""

from __future__ import annotations

from dataclasses import dataclass

from chalicelib.worker.holdings import Holdings
from chalicelib.worker.ledger import Ledger
from chalicelib.worker.room import Room
from chalicelib.worker.send_slots import SendSlots
from tests.support.clock import FakeClock
from tests.support.seed.worker import claimed_execution as claimed


@dataclass
class Excluded:
    """The endpoints a claim leaves out, as the worker last read them."""

    excluded: tuple[str, ...] = ()


def room_of(capacity: int = 8, excluded: tuple[str, ...] = ()) -> tuple[Room, Ledger]:
    """A room over a ledger whose endpoints may each take every slot (no reserve)."""
    clock = FakeClock(monotonic_start=100.0)
    holdings = Holdings(
        capacity=capacity, default_cap=capacity, lease_sec=30, clock=clock.monotonic
    )
    ledger = Ledger(holdings, SendSlots(capacity), wake=lambda: None, clock=clock.monotonic)
    return Room(ledger, Excluded(excluded)), ledger


def test_a_claim_sized_while_another_is_in_flight_gets_the_room_left() -> None:
    """The second reservation leaves out the first one's room, in total and from every
    endpoint's share; each is given back whole when its claim ends."""
    room, ledger = room_of(8, excluded=("paused",))
    ledger.take([claimed(f"held-{i}", "held") for i in range(3)], 100.0)
    first = room.reserve(recording=True)
    assert first is not None and (first.room, first.limits.pending) == (5, 0)
    assert first.limits.excluded == ("paused",) and first.started == 100.0
    for i in range(3):  # a writer recorded these meanwhile
        ledger.release(f"held-{i}", 1)
    second = room.reserve(recording=True)
    assert second is not None and (second.room, second.limits.pending) == (3, 5)
    assert room.reserve(recording=True) is None  # every slot reserved: none, nothing kept
    room.settle(second, [])
    room.settle(first, [])
    third = room.reserve(recording=True)
    assert third is not None and (third.room, third.limits.pending) == (8, 0)


def test_what_a_claim_took_is_held_as_its_reservation_is_given_back() -> None:
    room, ledger = room_of(4)
    plan = room.reserve(recording=True)
    assert plan is not None and plan.room == 4
    room.settle(plan, [claimed("e1", "a"), claimed("e2", "a")])
    assert len(ledger) == 2 and ledger.counts()["claimed"] == 2
    after = room.reserve(recording=True)
    assert after is not None and (after.room, after.limits.pending) == (2, 0)


def test_a_refill_is_reserved_only_while_the_claimer_runs_and_is_not_stopping() -> None:
    room, _ = room_of(4)
    assert room.reserve_refill() is None  # the claimer is not running
    stop = False
    with room.refilling(lambda: stop):
        plan = room.reserve_refill()
        assert plan is not None and plan.room == 4
        room.settle(plan, [])
        stop = True
        assert room.reserve_refill() is None  # stopping
    assert room.reserve_refill() is None  # stopped
