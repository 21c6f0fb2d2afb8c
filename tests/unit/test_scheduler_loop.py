"""The interval-loop runner and the Scheduler's thread handling, on a fake clock."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime

import pytest

from chalicelib.domain.loops import LoopPhase, LoopState
from chalicelib.errors import DatabaseUnavailable
from chalicelib.runtime.group import LoopCrashed, LoopGroup
from chalicelib.runtime.loop import Backoff, LoopClock, LoopSpec, Progress, run_loop
from chalicelib.runtime.registry import LoopRegistry
from chalicelib.scheduler.loops import Scheduler
from tests.support.clock import FakeClock

T0 = datetime(2026, 3, 16, 9, 0, tzinfo=UTC)


def loop_clock(fake: FakeClock) -> LoopClock:
    """The runner's time sources on the test's clock."""
    return LoopClock(monotonic=fake.monotonic, wait=fake.wait)


def spec(iteration: object, interval: float = 1.0, event: str | None = "thing_done") -> LoopSpec:
    return LoopSpec(
        name="test_loop", interval_sec=interval, iteration=iteration, metric_event=event
    )  # type: ignore[arg-type]


def test_runs_at_its_interval_until_the_time_budget_is_spent() -> None:
    fake = FakeClock()
    starts: list[float] = []

    def iteration() -> Progress:
        starts.append(fake.monotonic())
        return Progress(1)

    stats = run_loop(
        spec(iteration),
        threading.Event(),
        time_left=lambda: 5.5 - fake.monotonic(),
        clock=loop_clock(fake),
    )
    assert starts == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert (stats.iterations, stats.total, stats.failures) == (6, 6, 0)
    # The last wait is cut short by the budget: the loop never sleeps past its deadline.
    assert fake.sleeps[-1] == pytest.approx(0.5)
    assert fake.monotonic() == pytest.approx(5.5)


def test_a_full_batch_runs_again_without_waiting() -> None:
    fake = FakeClock()
    results = iter([Progress(10, more=True), Progress(10, more=True), Progress(3)])
    stop = threading.Event()

    def iteration() -> Progress:
        progress = next(results)
        if not progress.more:
            stop.set()
        return progress

    stats = run_loop(spec(iteration), stop, clock=loop_clock(fake))
    assert stats.total == 23
    assert fake.sleeps == [1.0]  # only after the batch that was not full


def test_stop_ends_the_loop_after_the_current_iteration() -> None:
    fake = FakeClock()
    stop = threading.Event()
    calls: list[int] = []

    def iteration() -> Progress:
        calls.append(1)
        stop.set()  # as a SIGTERM arriving mid-iteration would
        return Progress(2)

    stats = run_loop(spec(iteration), stop, clock=loop_clock(fake))
    assert (len(calls), stats.total) == (1, 2)


def test_no_iteration_starts_without_time_left() -> None:
    stats = run_loop(spec(lambda: Progress(1)), threading.Event(), time_left=lambda: -0.1)
    assert stats.iterations == 0


def test_a_failed_iteration_is_logged_and_the_loop_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = FakeClock()
    outcomes: list[Exception | Progress] = [DatabaseUnavailable("down"), Progress(4), Progress()]

    def iteration() -> Progress:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    with caplog.at_level(logging.INFO):
        stats = run_loop(
            spec(iteration),
            threading.Event(),
            time_left=lambda: 2.5 - fake.monotonic(),
            clock=loop_clock(fake),
        )
    # An outage is retried at the interval (a bug backs off: the test below).
    assert (stats.iterations, stats.failures, stats.total) == (3, 1, 4)
    errors = [r for r in caplog.records if getattr(r, "event", None) == "failing"]
    assert [(r.levelno, r.error) for r in errors] == [(logging.ERROR, "DatabaseUnavailable")]  # type: ignore[attr-defined]
    assert errors[0].exc_info is not None
    recovered = [r for r in caplog.records if getattr(r, "event", None) == "recovered"]
    assert [r.failures for r in recovered] == [1]  # type: ignore[attr-defined]


def test_any_exception_is_logged_once_and_the_loop_backs_off_then_recovers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = FakeClock()
    starts: list[float] = []
    registry = LoopRegistry(clock=lambda: T0)
    seen: list[LoopState] = []

    def iteration() -> Progress:
        starts.append(fake.monotonic())
        seen.append(registry.state("test_loop"))
        if len(starts) <= 3:
            raise KeyError("a bug, not the database")
        return Progress(1)

    with caplog.at_level(logging.INFO):
        stats = run_loop(
            spec(iteration),
            threading.Event(),
            time_left=lambda: 16.5 - fake.monotonic(),
            clock=loop_clock(fake),
            registry=registry,
        )
    # 2, 4, 8 s after each failed start (the interval is 1 s), then the interval again.
    assert starts == [0.0, 2.0, 6.0, 14.0, 15.0, 16.0]
    assert (stats.failures, stats.streak, stats.total) == (3, 0, 3)
    # The third failure in a row (not a database outage) makes the loop count as down.
    assert [(s.phase, s.failures, s.down) for s in seen[:4]] == [
        (LoopPhase.RUNNING, 0, False),
        (LoopPhase.FAILING, 1, False),
        (LoopPhase.FAILING, 2, False),
        (LoopPhase.FAILING, 3, True),
    ]
    assert (seen[3].error, seen[3].since) == ("KeyError", T0)
    assert seen[4].phase is LoopPhase.RUNNING
    assert registry.state("test_loop").phase is LoopPhase.STOPPED
    events = [getattr(r, "event", None) for r in caplog.records]
    assert events.count("failing") == 1  # once per streak, with its traceback
    assert events.count("recovered") == 1


def test_backoff_doubles_from_twice_the_interval_and_is_capped() -> None:
    backoff = Backoff()
    assert [backoff.delay(1.0, k) for k in range(1, 8)] == [2, 4, 8, 16, 30, 30, 30]
    assert backoff.delay(0.5, 1) == 1.0
    assert backoff.delay(60.0, 5) == 60.0  # never more often than the interval


def test_a_database_outage_is_retried_at_the_interval_and_a_bug_backs_off() -> None:
    """An outage backs nothing off (the loop picks up as soon as the database is back); any
    other failure waits 2, 4, 8 ... intervals."""
    for error, expected in [
        (DatabaseUnavailable("down"), [1.0, 1.0, 1.0, 1.0]),
        (ValueError("bug"), [2.0, 4.0, 8.0, 16.0]),
    ]:
        fake = FakeClock()

        def iteration(error: Exception = error) -> Progress:
            raise error

        run_loop(
            spec(iteration),
            threading.Event(),
            time_left=lambda f=fake: 31 - f.monotonic(),
            clock=loop_clock(fake),
        )
        assert fake.sleeps[:4] == expected


def test_a_database_outage_is_failing_but_not_down() -> None:
    registry = LoopRegistry(clock=lambda: T0)
    for _ in range(5):
        state = registry.failed("x", DatabaseUnavailable("down"))
    assert (state.phase, state.failures, state.transient, state.down) == (
        LoopPhase.FAILING,
        5,
        True,
        False,
    )


def test_metrics_are_structured_events(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeClock()
    durations = iter([0.0, 2.5, 0.0])

    def iteration() -> Progress:
        fake.advance(seconds=next(durations))  # the second iteration overruns its interval
        return Progress(3, detail={"kind": "x"})

    with caplog.at_level(logging.INFO):
        run_loop(
            spec(iteration),
            threading.Event(),
            time_left=lambda: 3.6 - fake.monotonic(),
            clock=loop_clock(fake),
            report_every_sec=100,
        )
    events = [(r.event, r.levelno) for r in caplog.records if hasattr(r, "event")]  # type: ignore[attr-defined]
    assert events.count(("thing_done", logging.INFO)) == 3
    # The third iteration started 1.5 s late (more than a whole interval): warned at once.
    assert ("loop_lag", logging.WARNING) in events
    # The summary at exit covers every iteration.
    summary = [r for r in caplog.records if getattr(r, "event", None) == "loop_lag"][-1]
    assert (summary.levelno, summary.iterations, summary.max_lag_ms) == (logging.INFO, 3, 1500.0)  # type: ignore[attr-defined]
    done = next(r for r in caplog.records if getattr(r, "event", None) == "thing_done")
    assert (done.count, done.kind, done.loop) == (3, "x", "test_loop")  # type: ignore[attr-defined]


def test_the_periodic_lag_report_is_debug_only(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeClock()

    with caplog.at_level(logging.DEBUG):
        run_loop(
            spec(lambda: Progress()),
            threading.Event(),
            time_left=lambda: 5.5 - fake.monotonic(),
            clock=loop_clock(fake),
            report_every_sec=2,
        )
    lag = [r.levelno for r in caplog.records if getattr(r, "event", None) == "loop_lag"]
    assert lag[:-1] and set(lag[:-1]) == {logging.DEBUG}  # every periodic report
    assert lag[-1] == logging.INFO  # the summary at exit


def test_loops_without_a_metric_event_log_no_counts(caplog: pytest.LogCaptureFixture) -> None:
    stop = threading.Event()

    def iteration() -> Progress:
        stop.set()
        return Progress(1)

    with caplog.at_level(logging.INFO):
        run_loop(spec(iteration, event=None), stop, clock=loop_clock(FakeClock()))
    assert {getattr(r, "event", None) for r in caplog.records} == {"loop_lag"}


def test_a_loop_that_dies_is_restarted_after_a_backoff_while_the_others_go_on() -> None:
    fake = FakeClock()
    calls: list[float] = []

    def iteration() -> Progress | None:
        calls.append(fake.monotonic())
        # None is not a Progress: the runner itself fails on it, outside the iteration's
        # own isolation, so the loop's thread dies (a bug of the runner, simulated).
        return None if len(calls) <= 2 else Progress()

    group = LoopGroup(
        [spec(iteration)], time_left=lambda: 10 - fake.monotonic(), loop_clock=loop_clock(fake)
    )
    phases: list[tuple[float, LoopPhase]] = []
    wait = fake.wait

    def watched_wait(stop: threading.Event, seconds: float) -> bool:
        phases.append((seconds, group.registry.state("test_loop").phase))
        return wait(stop, seconds)

    group._loop_clock = LoopClock(monotonic=fake.monotonic, wait=watched_wait)
    stats = group.run(threading.Event())
    assert group.restarts == {"test_loop": 2}
    # Restarted 1 s, then 2 s after each death; reported as restarting meanwhile.
    assert phases[:2] == [(1.0, LoopPhase.RESTARTING), (2.0, LoopPhase.RESTARTING)]
    assert calls[:4] == [0.0, 1.0, 3.0, 4.0]
    assert stats["test_loop"].iterations >= 6


def test_a_fatal_base_exception_still_stops_the_group() -> None:
    def crash() -> Progress:
        raise SystemExit("fatal")

    survivor = LoopSpec(name="survivor", interval_sec=0.01, iteration=lambda: Progress())
    doomed = LoopSpec(name="doomed", interval_sec=0.01, iteration=crash)
    scheduler = Scheduler([survivor, doomed])
    with pytest.raises(LoopCrashed, match="doomed") as raised:
        scheduler.run(threading.Event())
    assert isinstance(raised.value.__cause__, SystemExit)


def test_scheduler_returns_when_the_time_budget_is_spent() -> None:
    loops = [
        LoopSpec(name=f"loop{i}", interval_sec=0.01, iteration=lambda: Progress(1))
        for i in range(2)
    ]
    stats = Scheduler(loops, time_left=lambda: -1.0).run(threading.Event())
    assert {name: s.iterations for name, s in stats.items()} == {"loop0": 0, "loop1": 0}


def test_scheduler_stops_when_asked() -> None:
    stop = threading.Event()
    calls: list[int] = []

    def iteration() -> Progress:
        calls.append(1)
        stop.set()
        return Progress()

    stats = Scheduler([LoopSpec(name="one", interval_sec=60, iteration=iteration)]).run(stop)
    assert stats["one"].iterations == len(calls) == 1
