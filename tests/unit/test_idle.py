"""The idle sleep: what ends it early, and how the sleeps ended."""

from __future__ import annotations

from chalicelib.worker.idle import IdleWait


def test_a_wake_before_the_sleep_ends_it_at_once() -> None:
    """A nudge or a notification (the worker's nudge wakes the idle wait) that comes
    first ends the next sleep at once, and only that one."""
    idle = IdleWait(db=None, wakeup_notify="off")
    idle.wake()
    idle.sleep(30.0)  # ends at once: the wake came first
    assert (idle.stats.started, idle.stats.woken, idle.stats.timed_out) == (1, 1, 0)
    idle.sleep(0.0)  # the wake was spent: this one runs its (empty) interval
    assert (idle.stats.woken, idle.stats.timed_out) == (1, 1)
