"""Long-polls hold at most their share of the handlers: ``WaitSlots`` per key and in total."""

from __future__ import annotations

from contextlib import ExitStack

from chalicelib.services.longpoll import WaitSlots


def test_slots_are_capped_per_key_and_in_total_and_given_back() -> None:
    slots = WaitSlots(total=3, per_key=2)
    with ExitStack() as stack:
        granted = [stack.enter_context(slots.holding("a")) for _ in range(3)]
        assert granted == [True, True, False]  # the key's cap
        assert stack.enter_context(slots.holding("b")) is True
        assert stack.enter_context(slots.holding("c")) is False  # the total's cap
    with slots.holding("c") as again:
        assert again is True  # every slot was given back
