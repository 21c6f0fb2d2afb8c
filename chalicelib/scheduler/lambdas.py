"""How the scheduler's Lambda functions split their minute (EventBridge ``rate(1 minute)``).

The functions themselves are in :mod:`chalicelib.wiring.lambdas`. EventBridge cannot fire
more often than once a minute, so each function runs its loop at its own sub-minute
interval (1 s, 500 ms, 30 s by default) until the invocation's remaining time drops below
a margin, then returns a summary. The heartbeat writer and the region refresher run beside
the loop for the duration of the invocation. Invocations may overlap (the Lambda timeout
is longer than the minute): every loop is idempotent.
"""

from __future__ import annotations

from typing import Protocol

from chalicelib.runtime.loop import TimeLeft

SCHEDULE = "rate(1 minute)"
#: SCHEDULE's period: an invocation's last heartbeat says the next one comes by then.
SCHEDULE_PERIOD_SEC = 60.0

# The margin kept before the invocation's deadline: a fifth of the time the invocation had
# when it started, within these bounds. It must cover one iteration plus returning.
MIN_MARGIN_SEC = 0.5
MAX_MARGIN_SEC = 5.0


class LambdaContext(Protocol):
    def get_remaining_time_in_millis(self) -> float: ...


def deadline_margin(initial_remaining_sec: float) -> float:
    """Seconds to keep in reserve, given the time the invocation had at its start."""
    return min(MAX_MARGIN_SEC, max(MIN_MARGIN_SEC, initial_remaining_sec / 5))


def time_left_of(context: LambdaContext) -> TimeLeft:
    """Seconds the loops may still start iterations in: remaining time minus the margin."""
    margin = deadline_margin(context.get_remaining_time_in_millis() / 1000)
    return lambda: context.get_remaining_time_in_millis() / 1000 - margin
