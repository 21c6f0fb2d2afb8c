"""How long a worker Lambda invocation claims, and how long it may drain.

EventBridge invokes the ``run_worker`` function every minute (:mod:`chalicelib.wiring.lambdas`).
It claims and delivers until the invocation's remaining time drops below a margin, then
stops claiming and drains what is in flight, so consecutive invocations hand over without
leaving work RUNNING. The margin is the smaller of :data:`MAX_MARGIN_MS` (room for the
longest delivery plus the final finalize) and half of the invocation's budget.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

MAX_MARGIN_MS = 20_000
#: Left for returning after the drain (logs flushed, response sent).
EXIT_RESERVE_MS = 500


class LambdaContext(Protocol):
    def get_remaining_time_in_millis(self) -> int: ...


def invocation_limits(context: LambdaContext) -> tuple[Callable[[], bool], Callable[[], float]]:
    """(when to stop claiming, seconds left to drain then), read from ``context``."""
    budget = int(context.get_remaining_time_in_millis())
    margin = min(MAX_MARGIN_MS, budget // 2)

    def out_of_time() -> bool:
        return context.get_remaining_time_in_millis() < margin

    def drain_seconds() -> float:
        return max(0, context.get_remaining_time_in_millis() - EXIT_RESERVE_MS) / 1000

    return out_of_time, drain_seconds
