"""A group of interval loops run in threads until stopped or out of time.

The scheduler process, each scheduled Lambda invocation and the worker's background loops
are all a :class:`LoopGroup`: one thread per :class:`~chalicelib.runtime.loop.LoopSpec`,
and a last heartbeat (``DEAD`` on a graceful stop) once every loop has ended.

Supervision: a loop's iterations never end its thread (the runner catches what they
raise). If the thread's loop dies anyway (the runner itself raised), the group logs it,
records it in the :class:`~chalicelib.runtime.registry.LoopRegistry` as ``restarting``
(so the heartbeat reports that loop down) and runs it again after a back-off that doubles
with each crash of that loop (1 s, 2 s, 4 s ... at most
:data:`~chalicelib.runtime.loop.MAX_BACKOFF_SEC`), while the other loops go on. Only an
exception that is not an :class:`Exception` (``SystemExit``, ``KeyboardInterrupt``) stops
the whole group, which then raises :class:`LoopCrashed`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Protocol

from chalicelib.errors import TaskExecutorError
from chalicelib.logs import FailureLog, log_event
from chalicelib.runtime.loop import (
    Backoff,
    LoopClock,
    LoopSpec,
    LoopStats,
    TimeLeft,
    run_loop,
)
from chalicelib.runtime.registry import LoopRegistry

log = logging.getLogger(__name__)

# How often the main thread looks at the caller's stop event.
_WATCH_INTERVAL_SEC = 0.2

#: Back-off between restarts of a crashed loop: 1 s, doubling, at most 30 s.
RESTART_BACKOFF = Backoff(first=1.0)


class Heartbeat(Protocol):
    """What the group needs of a heartbeat writer: one beat with a given status."""

    def beat(self, status: str, *, next_beat_in: float | None = None) -> None: ...


class LoopCrashed(TaskExecutorError):
    """A loop thread ended on an exception that is not an ``Exception`` (see the log)."""


class LoopGroup:
    """Runs loops in threads; :meth:`run` returns when stopped or out of time.

    ``heartbeat`` with a ``final_status`` gets one last beat after the loops ended:
    ``DEAD`` for a process that stops, ``ALIVE`` with ``final_next_beat_in`` (its schedule's
    period) for a scheduled invocation, whose next one comes by then.
    ``registry`` receives every loop's state (the heartbeat writer reports it).
    """

    def __init__(
        self,
        loops: Sequence[LoopSpec],
        *,
        heartbeat: Heartbeat | None = None,
        final_status: str | None = None,
        final_next_beat_in: float | None = None,
        time_left: TimeLeft | None = None,
        loop_clock: LoopClock | None = None,
        registry: LoopRegistry | None = None,
    ) -> None:
        self.loops = list(loops)
        self.heartbeat = heartbeat
        self._final_status = final_status
        self._final_next_beat_in = final_next_beat_in
        self._time_left = time_left
        self._loop_clock = loop_clock or LoopClock()
        self.registry = registry or LoopRegistry()
        self.stats: dict[str, LoopStats] = {}
        #: loop name -> how many times its thread died and was restarted
        self.restarts: dict[str, int] = {}
        self.crashes: dict[str, BaseException] = {}
        self._crash_logs: dict[str, FailureLog] = {}

    def run(self, stop: threading.Event) -> dict[str, LoopStats]:
        """Run every loop until ``stop`` is set or time runs out; each finishes its iteration.

        Raises :class:`LoopCrashed` if a loop died on a ``BaseException`` that is not an
        ``Exception`` (the other loops are stopped first).
        """
        halt = threading.Event()
        threads = [
            threading.Thread(target=self._supervise, args=(spec, halt), name=f"te-{spec.name}")
            for spec in self.loops
        ]
        for thread in threads:
            thread.start()
        while not halt.is_set() and any(t.is_alive() for t in threads):
            if stop.wait(_WATCH_INTERVAL_SEC):
                break
        halt.set()
        for thread in threads:
            thread.join()
        self._final_heartbeat()
        if self.crashes:
            names = ", ".join(self.crashes)
            raise LoopCrashed(f"loops crashed: {names}") from next(iter(self.crashes.values()))
        return self.stats

    def _supervise(self, spec: LoopSpec, halt: threading.Event) -> None:
        """Run the loop; restart it after a back-off each time it dies on an Exception."""
        try:
            while not self._run_one(spec, halt):
                delay = RESTART_BACKOFF.delay(1.0, self.restarts[spec.name])
                if self._time_left is not None:
                    delay = min(delay, max(0.0, self._time_left()))
                if self._loop_clock.wait(halt, delay):
                    return
        except BaseException as exc:
            # Not swallowed: handed to the thread that called run(), which raises it.
            log.exception("loop %s crashed", spec.name)
            self.crashes[spec.name] = exc
        finally:
            # One loop ending (the deadline, or a fatal crash) ends them all: the process
            # stops or the invocation returns as a whole.
            halt.set()

    def _run_one(self, spec: LoopSpec, halt: threading.Event) -> bool:
        """One run of the loop: True when it ended normally, False when it died."""
        try:
            self.stats[spec.name] = run_loop(
                spec,
                halt,
                time_left=self._time_left,
                clock=self._loop_clock,
                registry=self.registry,
            )
        except Exception as exc:
            self.restarts[spec.name] = self.restarts.get(spec.name, 0) + 1
            self.registry.crashed(spec.name, exc)
            # The first crash with its traceback, then a count every 30 s (FailureLog).
            self._crash_log(spec.name).failed(exc)
            return False
        return True

    def _crash_log(self, name: str) -> FailureLog:
        if name not in self._crash_logs:
            self._crash_logs[name] = FailureLog(log, f"loop {name} (restarted after a back-off)")
        return self._crash_logs[name]

    def _final_heartbeat(self) -> None:
        if self.heartbeat is None or self._final_status is None:
            return
        try:
            self.heartbeat.beat(self._final_status, next_beat_in=self._final_next_beat_in)
        except TaskExecutorError as exc:
            log_event(log, "heartbeat_failed", logging.WARNING, error=str(exc))
