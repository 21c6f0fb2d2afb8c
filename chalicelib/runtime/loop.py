"""The interval-loop runner shared by every background loop (scheduler, health, worker).

A loop is a :class:`LoopSpec`: a name, an interval and an ``iteration`` that does one
bounded batch of work and returns :class:`Progress`. :func:`run_loop` runs it until a stop
event is set or the caller's time budget (a Lambda invocation's remaining time) is spent:

* iterations start ``interval_sec`` apart (measured from the previous start); after a full
  batch (``Progress.more``) the next one starts at once, so a backlog drains at full speed
  while each transaction stays small;
* a stop request or the deadline ends the loop *between* iterations, never inside one;
* the time budget also bounds every wait, so a loop never sleeps past its deadline;
* an iteration that raises anything (the database unreachable, or a bug, or a row the
  loop's own per-row isolation did not catch) is logged once per streak of failures
  (:class:`~chalicelib.logs.FailureLog`: the first with its traceback, then a count every
  30 s, then ``recovered``) and the loop carries on, the next iteration after a back-off
  that doubles with each failure in a row (:class:`Backoff`: from twice the interval, never
  more often than the interval, at most :data:`MAX_BACKOFF_SEC` apart) and resets on the
  first success; while the database is unreachable it tries again at its interval, so it
  picks up as soon as the database is back. The loop's state (running, or failing since
  when and on what) goes to the process's
  :class:`~chalicelib.runtime.registry.LoopRegistry`, which its heartbeat reports. A loop
  that dies anyway (the runner itself raised) is restarted by its
  :class:`~chalicelib.runtime.group.LoopGroup`;
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

from chalicelib.db.faults import is_transient
from chalicelib.logs import FailureLog, log_event
from chalicelib.runtime.registry import LoopRegistry

log = logging.getLogger(__name__)

#: Seconds left before the loop must stop (the deadline minus a safety margin).
TimeLeft = Callable[[], float]

#: The longest wait between two failed iterations (and between two restarts of a loop).
MAX_BACKOFF_SEC = 30.0


@dataclass(frozen=True, kw_only=True)
class Backoff:
    """How long a loop waits after failures in a row: ``first`` times the interval for the
    first, doubling with each further one, never less than the interval and never more
    than ``cap_sec`` (unless the interval itself is longer)."""

    first: float = 2.0
    cap_sec: float = MAX_BACKOFF_SEC

    def delay(self, interval_sec: float, failures: int) -> float:
        """Seconds from the start of the last failed iteration to the next one."""
        grown = interval_sec * self.first * 2 ** min(max(failures - 1, 0), 30)
        return max(interval_sec, min(self.cap_sec, grown))


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
    streak: int = 0  #: failed iterations in a row (0 after a success)
    #: the last failure was transient: the database away or contended (no back-off)
    outage: bool = False
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
    registry: LoopRegistry | None = None,
    backoff: Backoff | None = None,
) -> LoopStats:
    """Run ``spec`` until ``stop`` is set or ``time_left()`` drops to zero."""
    clock = clock or LoopClock()
    registry = registry or LoopRegistry()
    backoff = backoff or Backoff()
    stats = LoopStats(spec.name)
    registry.running(spec.name)
    due = last_report = clock.monotonic()
    while not stop.is_set() and _seconds_left(time_left) > 0:
        started = clock.monotonic()
        lag = max(0.0, started - due)
        progress = _run_iteration(spec, stats, registry)
        stats.record(progress, lag)
        _report(spec, progress, lag)
        if started - last_report >= report_every_sec:
            # Routine, so DEBUG: an idle process logs nothing at INFO (a late iteration is
            # a WARNING of its own, and the summary at exit stays INFO).
            stats.report_lag(log, logging.DEBUG)
            last_report = started
        following = _next_start(spec, stats, progress, started, backoff)
        due = clock.monotonic() if following is None else following
        pause = min(due - clock.monotonic(), _seconds_left(time_left))
        if pause > 0:
            clock.wait(stop, pause)
    stats.report_lag(log)
    registry.stopped(spec.name)
    return stats


def _seconds_left(time_left: TimeLeft | None) -> float:
    return float("inf") if time_left is None else time_left()


def _next_start(
    spec: LoopSpec, stats: LoopStats, progress: Progress, started: float, backoff: Backoff
) -> float | None:
    """When the next iteration is due (None: at once, after a full batch)."""
    if stats.streak and not stats.outage:
        return started + backoff.delay(spec.interval_sec, stats.streak)
    if stats.streak:
        # An outage is the same for every loop and every row: backing off would only delay
        # the recovery (cron ticks, promotions) once the database is back. Each try is one
        # failed connection, and the FailureLog keeps the log to a line per 30 s.
        return started + spec.interval_sec
    return None if progress.more else started + spec.interval_sec


def _run_iteration(spec: LoopSpec, stats: LoopStats, registry: LoopRegistry) -> Progress:
    try:
        progress = spec.iteration()
    except Exception as exc:
        # The loop outlives a database outage and a bug alike; the next iteration tries
        # again after a back-off. The first failure is logged in full, then one line per
        # 30 s while it lasts (FailureLog); the registry tells the heartbeat.
        stats.failures += 1
        stats.streak += 1
        stats.outage = is_transient(exc)
        stats.failure_log(spec.name).failed(exc)
        registry.failed(spec.name, exc)
        return Progress()
    if stats.streak:
        registry.running(spec.name)
    stats.streak = 0
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
