"""The scheduler's process kinds: the long-lived process, one loop per Lambda invocation,
and the scheduler part of the local stack, each a loop group over one
:class:`~chalicelib.wiring.process.ProcessRoot`'s ``scheduler`` pool.

``python -m chalicelib.scheduler`` runs :func:`main`: SIGTERM or SIGINT lets each loop
finish its current iteration, a final ``DEAD`` heartbeat is written, and the process exits
0. A loop whose iteration fails backs off, and one whose thread dies is restarted by the
group (:mod:`chalicelib.runtime.group`); the process exits 1 only if a loop died on a
``SystemExit``-like exception. Several such processes may run at once: every loop is
idempotent, no leader election is needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chalicelib.health.heartbeat import ALIVE
from chalicelib.runtime.process import LoopGroupPart, ProcessRunner
from chalicelib.scheduler.lambdas import SCHEDULE_PERIOD_SEC, LambdaContext, time_left_of
from chalicelib.scheduler.loops import LOOP_NAMES, Scheduler
from chalicelib.wiring.process import ProcessRoot


def long_lived_part(process: ProcessRoot, loops: Sequence[str] = LOOP_NAMES) -> LoopGroupPart:
    """Every loop plus the health stubs, a final DEAD heartbeat when stopped."""
    scheduler = Scheduler.build(
        process.settings, process.database("scheduler"), loops=loops, clock=process.clock
    )
    return LoopGroupPart("scheduler", scheduler)


def main() -> int:
    """``python -m chalicelib.scheduler``: run every loop until SIGTERM/SIGINT."""
    process = ProcessRoot()
    process.configure_logging()
    runner = ProcessRunner(
        [long_lived_part(process)], name="scheduler", counters=process.database_stats
    )
    runner.stop_on_signals()
    return runner.exit(runner.run())


def invoke(
    process: ProcessRoot, loop: str, context: LambdaContext, *, beside: tuple[str, ...] = ()
) -> dict[str, Any]:
    """One scheduled invocation: ``loop`` (plus ``beside`` and the health stubs) until the
    invocation is nearly out of time; a summary of ``loop``'s iterations."""
    process.configure_logging()
    scheduler = Scheduler.build(
        process.settings,
        process.database("scheduler"),
        loops=[loop, *beside],
        clock=process.clock,
        component=f"scheduler/{loop}",
        # Not dead: the next invocation comes within the schedule's period.
        final_status=ALIVE,
        final_next_beat_in=SCHEDULE_PERIOD_SEC,
        time_left=time_left_of(context),
    )
    part = LoopGroupPart("scheduler", scheduler)
    outcome = ProcessRunner([part], name="scheduler", announce=False).run()
    for failure in outcome.failures.values():
        raise failure
    own = scheduler.stats[loop]
    return {
        "loop": loop,
        "iterations": own.iterations,
        "count": own.total,
        "failures": own.failures,
    }
