"""The interval-loop runner shared by every background loop (scheduler, health, worker).

A loop is a :class:`LoopSpec`: a name, an interval and an ``iteration`` that does one
bounded batch of work and returns :class:`Progress`. :func:`run_loop` runs it until a stop
event is set or the caller's time budget (a Lambda invocation's remaining time) is spent:

* iterations start ``interval_sec`` apart (measured from the previous start); after a full
  batch (``Progress.more``) the next one starts at once, so a backlog drains at full speed
  while each transaction stays small;
* a stop request or the deadline ends the loop *between* iterations, never inside one;
* the time budget also bounds every wait, so a loop never sleeps past its deadline;
* a failed iteration (a :class:`~chalicelib.errors.TaskExecutorError`, e.g. the database
  unreachable or retries exhausted) is logged and the loop carries on at its interval;
* metrics are structured log events: the loop's own event (``cron_ticks_materialized``,
  ``delayed_promoted``, ``reclaimed``) whenever it did something, and ``loop_lag`` (how late
  iterations started compared with their schedule) every ``report_every_sec`` and on exit,
  or at once, as a warning, when an iteration started more than a whole interval late.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from chalicelib.errors import TaskExecutorError
from chalicelib.logs import FailureLog, log_event

log = logging.getLogger(__name__)

#: Seconds left before the loop must stop (the deadline minus a safety margin).
TimeLeft = Callable[[], float]


@dataclass(frozen=True)
class Progress:
    """What one iteration did."""

    count: int = 0  #: rows acted on (ticks materialized, executions promoted, ...)
    more: bool = False  #: the batch was full: run again at once instead of waiting
    detail: Mapping[str, Any] = field(default_factory=dict)  #: extra fields for the metric


@dataclass(frozen=True, kw_only=True)
class LoopSpec:
    """One loop: what to run, how often, and the metric event it reports."""

    name: str
    interval_sec: float
    iteration: Callable[[], Progress]
    metric_event: str | None = None  #: None for stubs that report nothing


@dataclass
class LoopStats:
    """Counters of one loop since it started (returned by :func:`run_loop`)."""

    name: str
    iterations: int = 0
    failures: int = 0
    total: int = 0
    max_lag_sec: float = 0.0
    lag_sum_sec: float = 0.0
    _window: list[float] = field(default_factory=list, repr=False)
    _failure_log: FailureLog | None = field(default=None, repr=False)

    def failure_log(self, name: str) -> FailureLog:
        if self._failure_log is None:
            self._failure_log = FailureLog(log, f"loop {name}")
        return self._failure_log

    def record(self, progress: Progress, lag_sec: float) -> None:
        self.iterations += 1
        self.total += progress.count
        self.max_lag_sec = max(self.max_lag_sec, lag_sec)
        self.lag_sum_sec += lag_sec
        self._window.append(lag_sec)

    def report_lag(self, logger: logging.Logger, level: int = logging.INFO) -> None:
        """Log ``loop_lag`` for the iterations since the previous report."""
        if not self._window:
            return
        window, self._window = self._window, []
        log_event(
            logger,
            "loop_lag",
            level,
            loop=self.name,
            iterations=len(window),
            max_lag_ms=round(max(window) * 1000, 1),
            mean_lag_ms=round(sum(window) / len(window) * 1000, 1),
        )


@dataclass(frozen=True, kw_only=True)
class LoopClock:
    """Time sources of the runner (injected so unit tests need no real time)."""

    monotonic: Callable[[], float] = time.monotonic
    #: waits up to the given seconds or until stopped; returns True when stopped
    wait: Callable[[threading.Event, float], bool] = threading.Event.wait


def run_loop(
    spec: LoopSpec,
    stop: threading.Event,
    *,
    time_left: TimeLeft | None = None,
    clock: LoopClock | None = None,
    report_every_sec: float = 60.0,
) -> LoopStats:
    """Run ``spec`` until ``stop`` is set or ``time_left()`` drops to zero."""
    clock = clock or LoopClock()
    stats = LoopStats(spec.name)
    due = last_report = clock.monotonic()
    while not stop.is_set() and _seconds_left(time_left) > 0:
        started = clock.monotonic()
        lag = max(0.0, started - due)
        progress = _run_iteration(spec, stats)
        stats.record(progress, lag)
        _report(spec, progress, lag)
        if started - last_report >= report_every_sec:
            # Routine, so DEBUG: an idle process logs nothing at INFO (a late iteration is
            # a WARNING of its own, and the summary at exit stays INFO).
            stats.report_lag(log, logging.DEBUG)
            last_report = started
        due = clock.monotonic() if progress.more else started + spec.interval_sec
        pause = min(due - clock.monotonic(), _seconds_left(time_left))
        if pause > 0:
            clock.wait(stop, pause)
    stats.report_lag(log)
    return stats


def _seconds_left(time_left: TimeLeft | None) -> float:
    return float("inf") if time_left is None else time_left()


def _run_iteration(spec: LoopSpec, stats: LoopStats) -> Progress:
    try:
        progress = spec.iteration()
    except TaskExecutorError as exc:
        # The loop outlives a database outage; the next iteration tries again. The first
        # failure is logged in full, then one line per 30 s while it lasts (FailureLog).
        stats.failures += 1
        stats.failure_log(spec.name).failed(exc)
        return Progress()
    stats.failure_log(spec.name).succeeded()
    return progress


def _report(spec: LoopSpec, progress: Progress, lag: float) -> None:
    if spec.metric_event is not None and progress.count:
        log_event(log, spec.metric_event, loop=spec.name, count=progress.count, **progress.detail)
    if lag > spec.interval_sec:
        log_event(
            log,
            "loop_lag",
            logging.WARNING,
            loop=spec.name,
            iterations=1,
            max_lag_ms=round(lag * 1000, 1),
            mean_lag_ms=round(lag * 1000, 1),
        )
