"""The local EventBridge (``make run PROFILE=lean``, chalicelib/wiring/eventbridge.py) with
containers that record what they are asked: the schedule, the per-function container
pools, the context's countdown, failures, and a stop that leaves nothing running.

The schedule runs on a fake clock (its waits advance a counter, no real time passes);
only the stop test runs on the real clock, and waits for states, never for durations.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest

from chalicelib.profiles import PROFILES, ScheduledFunction
from chalicelib.runtime.loop import LoopClock
from chalicelib.scheduler.lambdas import time_left_of
from chalicelib.wiring.eventbridge import FunctionPool, InvocationContext, LocalEventBridge
from chalicelib.worker.lambdas import invocation_limits
from tests.support.clock import FakeClock
from tests.support.waiting import wait_for

WORKER = ScheduledFunction(name="run_worker", timeout_sec=80)


class ScheduledWaits:
    """The schedule's waits on the test's :class:`FakeClock` (1000 s at first):
    ``on_wait(n)`` runs at the n-th wait (1-based) and says whether to stop there; the first
    wait may oversleep by ``overshoot`` seconds."""

    def __init__(self, on_wait: Callable[[int], bool], *, overshoot: float = 0.0) -> None:
        self.time = FakeClock(monotonic_start=1000.0)
        self._on_wait = on_wait
        self._overshoot = overshoot

    @property
    def waits(self) -> list[float]:
        return self.time.sleeps

    def clock(self) -> LoopClock:
        return LoopClock(monotonic=self.time.monotonic, wait=self.wait)

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        self.time.sleep(seconds)
        if len(self.waits) == 1:
            self.time.advance(seconds=self._overshoot)
        if self._on_wait(len(self.waits)):
            stop.set()
        return stop.is_set()


def stop_at(n: int) -> Callable[[int], bool]:
    return lambda count: count >= n


class Recording:
    """A container: records each invocation; ``hold`` keeps an invocation running until
    it is set or the invocation's time is spent."""

    def __init__(self, function: ScheduledFunction, *, hold: threading.Event | None = None):
        self.function = function
        self.invoked: list[str] = []
        self.entered = threading.Event()
        self.closed = False
        self._hold = hold

    def invoke(self, function: str, context: Any) -> dict[str, Any]:
        self.invoked.append(function)
        self.entered.set()
        while self._hold is not None and not self._hold.is_set():
            if context.get_remaining_time_in_millis() <= 0:
                return {"cut": True}
            self._hold.wait(0.01)
        return {"function": function}

    def close(self) -> None:
        self.closed = True


class Factory:
    def __init__(self, hold: threading.Event | None = None) -> None:
        self.built: list[Recording] = []
        self._hold = hold

    def __call__(self, function: ScheduledFunction) -> Recording:
        container = Recording(function, hold=self._hold)
        self.built.append(container)
        return container

    def invocations(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for container in self.built:
            for name in container.invoked:
                counts[name] = counts.get(name, 0) + 1
        return counts


def test_every_function_is_invoked_at_start_and_then_once_a_period(
    caplog: pytest.LogCaptureFixture,
) -> None:
    factory = Factory()
    time = ScheduledWaits(stop_at(3))
    bridge = LocalEventBridge(PROFILES["lean"], factory, period_sec=60, clock=time.clock())
    with caplog.at_level(logging.DEBUG, logger="chalicelib.local"):
        stats = bridge.run()

    assert time.waits == [60, 60, 60]
    assert factory.invocations() == dict.fromkeys(PROFILES["lean"], 3)
    assert stats["invocations"] == 12 and stats["failures"] == 0
    # One warm container per function: each invocation returned before the next one.
    assert {c.function.name for c in factory.built} == set(PROFILES["lean"])
    assert stats["containers"] == dict.fromkeys(PROFILES["lean"], 1)
    # Each container was built with its function's timeout and settings overrides.
    for container in factory.built:
        assert container.function == PROFILES["lean"][container.function.name]
    lines = [r for r in caplog.records if getattr(r, "event", None) == "scheduled_invocation"]
    assert len(lines) == 12 and {r.levelno for r in lines} == {logging.DEBUG}
    assert {r.function for r in lines} == set(PROFILES["lean"])  # type: ignore[attr-defined]


def test_the_period_is_the_constructors() -> None:
    factory = Factory()
    time = ScheduledWaits(stop_at(2))
    LocalEventBridge({"w": WORKER}, factory, period_sec=0.25, clock=time.clock()).run()
    assert time.waits == [0.25, 0.25]
    assert factory.invocations() == {"run_worker": 2}
    with pytest.raises(ValueError, match="period_sec"):
        LocalEventBridge({"w": WORKER}, factory, period_sec=0)


def test_a_schedule_that_fell_behind_skips_the_missed_periods() -> None:
    """As EventBridge after an outage: the next period on the grid, no burst of catch-ups."""
    factory = Factory()
    time = ScheduledWaits(stop_at(2), overshoot=150)  # the first wait overslept 2.5 periods
    LocalEventBridge({"w": WORKER}, factory, period_sec=60, clock=time.clock()).run()
    assert time.waits == [60, pytest.approx(30)]
    assert factory.invocations() == {"run_worker": 2}


def test_an_overlapping_invocation_gets_its_own_container_and_an_idle_one_is_reused() -> None:
    """The worker's 80 s timeout outlasts the minute: AWS runs the next invocation in
    another container, and a warm idle container serves the one after."""
    release = threading.Event()
    built: list[Recording] = []

    def build(function: ScheduledFunction) -> Recording:
        # The first container holds its invocation until released.
        built.append(Recording(function, hold=None if built else release))
        return built[-1]

    def on_wait(count: int) -> bool:
        if count == 1:
            wait_for(lambda: built and built[0].entered.is_set(), "the 1st invocation to run")
        if count == 2:
            wait_for(lambda: len(built) == 2 and built[1].invoked, "the 2nd, in a 2nd container")
            release.set()
            wait_for(lambda: bridge.running, "both to return", until=lambda n: n == 0)
        return count >= 3

    time = ScheduledWaits(on_wait)
    bridge = LocalEventBridge({"w": WORKER}, build, period_sec=60, clock=time.clock())
    stats = bridge.run()

    assert stats["containers"] == {"run_worker": 2} and stats["invocations"] == 3
    assert sorted(len(c.invoked) for c in built) == [1, 2]  # the 3rd reused an idle one
    assert all(c.closed for c in built)


def test_a_pool_builds_a_container_only_when_every_one_is_busy() -> None:
    factory = Factory()
    pool = FunctionPool(WORKER, factory)
    a = pool.acquire()
    b = pool.acquire()
    assert a is not b and pool.built == 2
    pool.release(a)
    assert pool.acquire() is a and pool.built == 2
    pool.release(a)
    pool.release(b)
    pool.close()
    assert a.closed and b.closed  # type: ignore[attr-defined]


def test_the_context_counts_down_from_the_function_timeout() -> None:
    now = [50.0]
    context = InvocationContext("run_worker", 80, monotonic=lambda: now[0])
    assert context.function_name == "run_worker"
    assert context.get_remaining_time_in_millis() == 80_000
    now[0] += 1.5
    assert context.get_remaining_time_in_millis() == 78_500
    # The deployed handlers read it as a Lambda context: the worker claims until 20 s are
    # left, a scheduler loop until its margin.
    out_of_time, drain_seconds = invocation_limits(context)
    assert not out_of_time()
    now[0] += 59
    assert out_of_time() and drain_seconds() == pytest.approx(19.0)


def test_a_cut_context_is_spent_for_every_handler_even_one_that_reads_it_late() -> None:
    now = [0.0]
    context = InvocationContext("promote_delayed_executions", 10, monotonic=lambda: now[0])
    context.cut()
    assert context.get_remaining_time_in_millis() < 0
    # A worker that reads its budget only now stops at once, with nothing to drain for.
    out_of_time, drain_seconds = invocation_limits(context)
    assert out_of_time() and drain_seconds() == 0
    assert time_left_of(context)() < 0


def test_a_failed_invocation_is_a_warning_naming_the_function_and_the_next_period_retries(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Failing(Recording):
        def invoke(self, function: str, context: Any) -> dict[str, Any]:
            self.invoked.append(function)
            raise RuntimeError("database is down")

    built: list[Failing] = []

    def build(function: ScheduledFunction) -> Failing:
        built.append(Failing(function))
        return built[-1]

    time = ScheduledWaits(stop_at(2))
    bridge = LocalEventBridge(
        {"p": PROFILES["lean"]["promote_delayed_executions"]}, build, clock=time.clock()
    )
    with caplog.at_level(logging.WARNING, logger="chalicelib.local"):
        stats = bridge.run()

    assert stats["failures"] == 2 and stats["invocations"] == 2
    assert len(built) == 1 and built[0].invoked == ["promote_delayed_executions"] * 2
    failures = [r for r in caplog.records if r.getMessage() == "scheduled_invocation_failed"]
    assert len(failures) == 2 and {r.levelno for r in failures} == {logging.WARNING}
    assert {r.function for r in failures} == {"promote_delayed_executions"}  # type: ignore[attr-defined]
    assert "RuntimeError: database is down" in failures[0].error  # type: ignore[attr-defined]


def test_stop_cuts_running_invocations_joins_them_and_closes_every_container() -> None:
    never = threading.Event()  # held until their time is spent
    factory = Factory(hold=never)
    bridge = LocalEventBridge(PROFILES["lean"], factory, period_sec=3600)
    outcome: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: outcome.update(bridge.run()))
    runner.start()
    try:
        wait_for(lambda: bridge.running, "every function running", until=lambda n: n == 4)
    finally:
        bridge.stop()
        runner.join(timeout=30)

    assert not runner.is_alive()
    assert outcome["invocations"] == 4 and outcome["failures"] == 0
    assert all(c.closed for c in factory.built) and len(factory.built) == 4
    assert not [t for t in threading.enumerate() if t.name.startswith("te-lambda-")]
