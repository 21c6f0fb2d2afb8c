"""Run the whole scheduler in the current thread until a stop event is set."""

from __future__ import annotations

import threading

from chalicelib import wiring
from chalicelib.scheduler.service import Scheduler


def build_scheduler() -> Scheduler:
    """All three loops plus the health stubs, over this process's scheduler pool."""
    return Scheduler.build(wiring.settings(), wiring.database("scheduler"), clock=wiring.utcnow)


def run_scheduler_until(stop: threading.Event) -> None:
    """Run every loop until ``stop`` is set; the current iterations finish first.

    A loop that dies is restarted (with back-off); raises
    :class:`~chalicelib.runtime.group.LoopCrashed` only for a ``SystemExit``-like one.
    """
    build_scheduler().run(stop)
