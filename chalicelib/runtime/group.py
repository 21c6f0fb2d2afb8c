"""A group of interval loops run in threads until stopped or out of time.

The scheduler process, each scheduled Lambda invocation and the worker's background loops
are all a :class:`LoopGroup`: one thread per :class:`~chalicelib.runtime.loop.LoopSpec`,
and a last heartbeat (``DEAD`` on a graceful stop) once every loop has ended.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Protocol

from chalicelib.errors import TaskExecutorError
from chalicelib.logs import log_event
from chalicelib.runtime.loop import LoopClock, LoopSpec, LoopStats, TimeLeft, run_loop

log = logging.getLogger(__name__)

# How often the main thread looks at the caller's stop event.
_WATCH_INTERVAL_SEC = 0.2


class Heartbeat(Protocol):
    """What the group needs of a heartbeat writer: one beat with a given status."""

    def beat(self, status: str) -> None: ...


class LoopCrashed(TaskExecutorError):
    """A loop thread ended on an unexpected exception (its traceback is in the log)."""


class LoopGroup:
    """Runs loops in threads; :meth:`run` returns when stopped or out of time.

    ``heartbeat`` with a ``final_status`` gets one last beat after the loops ended (a
    scheduled invocation passes None: the next one comes within a minute, so not dead).
    """

    def __init__(
        self,
        loops: Sequence[LoopSpec],
        *,
        heartbeat: Heartbeat | None = None,
        final_status: str | None = None,
        time_left: TimeLeft | None = None,
        loop_clock: LoopClock | None = None,
    ) -> None:
        self.loops = list(loops)
        self.heartbeat = heartbeat
        self._final_status = final_status
        self._time_left = time_left
        self._loop_clock = loop_clock
        self.stats: dict[str, LoopStats] = {}
        self.crashes: dict[str, BaseException] = {}

    def run(self, stop: threading.Event) -> dict[str, LoopStats]:
        """Run every loop until ``stop`` is set or time runs out; each finishes its iteration.

        Raises :class:`LoopCrashed` if a loop died on an unexpected exception (the other
        loops are stopped first, so a supervisor can restart the whole process).
        """
        halt = threading.Event()
        threads = [
            threading.Thread(target=self._run_one, args=(spec, halt), name=f"te-{spec.name}")
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

    def _run_one(self, spec: LoopSpec, halt: threading.Event) -> None:
        try:
            self.stats[spec.name] = run_loop(
                spec, halt, time_left=self._time_left, clock=self._loop_clock
            )
        except BaseException as exc:
            # Not swallowed: handed to the thread that called run(), which raises it.
            log.exception("loop %s crashed", spec.name)
            self.crashes[spec.name] = exc
        finally:
            # One loop ending (deadline, or a crash) ends them all: the process restarts
            # or the invocation returns as a whole.
            halt.set()

    def _final_heartbeat(self) -> None:
        if self.heartbeat is None or self._final_status is None:
            return
        try:
            self.heartbeat.beat(self._final_status)
        except TaskExecutorError as exc:
            log_event(log, "heartbeat_failed", logging.WARNING, error=str(exc))
