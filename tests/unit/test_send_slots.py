"""The delivery loop's send slots: first come first served, given back from any thread.

No time passes in these tests: :func:`turns` lets the event loop run what is ready.
"""

from __future__ import annotations

import asyncio

from chalicelib.worker.send_slots import SendSlots


async def turns(count: int = 5) -> None:
    """Let the running loop run what is ready, ``count`` rounds of it."""
    loop = asyncio.get_running_loop()
    for _ in range(count):
        ready = loop.create_future()
        loop.call_soon(ready.set_result, None)
        await ready


def test_send_slots_go_to_the_oldest_waiter_and_never_exceed_the_capacity() -> None:
    """Two slots, five deliveries: two go out, the others wait in order; slots given back
    from another thread (a recorded batch: one call for all of them) go to the oldest
    waiters, and what no one waits for is counted free."""
    order: list[int] = []
    holding: list[int] = []

    async def scenario() -> None:
        slots = SendSlots(2)
        loop = asyncio.get_running_loop()

        async def deliver(i: int) -> None:
            await slots.acquire()
            order.append(i)
            holding.append(i)
            assert len(holding) <= 2

        tasks = [asyncio.create_task(deliver(i)) for i in range(5)]
        await turns()
        assert order == [0, 1]
        holding.clear()
        await loop.run_in_executor(None, slots.give_back, 2)  # from the finalizer's thread
        await turns()
        assert order == [0, 1, 2, 3]
        holding.clear()
        slots.give_back(3)  # on the loop: one waiter, two slots left over
        await asyncio.gather(*tasks)
        assert order == [0, 1, 2, 3, 4]
        holding.clear()
        await asyncio.wait_for(slots.acquire(), 1)  # the two left over are free at once
        await asyncio.wait_for(slots.acquire(), 1)
        late = asyncio.create_task(slots.acquire())
        await turns()
        assert not late.done()  # and no more than that
        late.cancel()

    asyncio.run(scenario())


def test_a_slot_handed_to_a_cancelled_delivery_goes_to_the_next() -> None:
    async def scenario() -> None:
        slots = SendSlots(1)
        await slots.acquire()
        first = asyncio.create_task(slots.acquire())
        second = asyncio.create_task(slots.acquire())
        await turns()
        slots.give_back()  # handed to the first waiter, which is cancelled before it runs
        first.cancel()
        await asyncio.wait_for(second, 1)
        assert first.cancelled()

    asyncio.run(scenario())


def test_slots_given_back_before_any_was_taken_change_nothing() -> None:
    """Nothing was ever taken (no loop yet): a give-back is ignored, not counted free."""

    async def scenario() -> None:
        slots = SendSlots(1)
        slots.give_back(3)
        await slots.acquire()
        late = asyncio.create_task(slots.acquire())
        await turns()
        assert not late.done()
        late.cancel()

    asyncio.run(scenario())
