"""One runner for every process kind: signals, start, stop, wind down, stats.

The worker process, the scheduler process, each Lambda invocation and the local stack are
all a :class:`ProcessRunner` over one or more :class:`Part` s (the worker, a loop group,
the API server). The runner starts each part in its own thread and waits until it is told
to stop (SIGINT/SIGTERM, :meth:`ProcessRunner.stop`) or until any part ends by itself (a
Lambda deadline, a crashed loop group); then it asks every part to stop, waits for each to
wind down (drain, close) and logs one ``<part>_stopped`` line with the part's stats and the
process's counters (40001 retries, reconnects).

Like the rest of :mod:`chalicelib.runtime` it knows none of the parts it runs.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Protocol

from chalicelib.logs import log_event
from chalicelib.runtime.group import LoopGroup

log = logging.getLogger(__name__)

# How often the main thread looks at the stop event and the parts (a signal may be
# delivered to another thread and only flagged for this one: an endless wait would never
# run the handler).
_WATCH_INTERVAL_SEC = 0.2

Stats = Mapping[str, Any]


class Part(Protocol):
    """One long-running part of a process."""

    #: names the part's thread and its log lines (``<name>_started``, ``<name>_stopped``)
    name: str

    @property
    def about(self) -> Stats:
        """What the ``<name>_started`` line says about the part."""
        ...

    def run(self) -> Stats:
        """Run until :meth:`stop` (or the part's own end), wind down, return its stats.

        A part that had to leave work running (threads still busy) says ``drained: False``.
        """
        ...

    def stop(self) -> None:
        """Ask :meth:`run` to return soon (thread-safe; not called from a signal handler)."""
        ...


@dataclass
class Outcome:
    """How the parts ended: their stats, and the exception of each part that failed."""

    stats: dict[str, Stats] = field(default_factory=dict)
    failures: dict[str, BaseException] = field(default_factory=dict)

    @property
    def drained(self) -> bool:
        """False when some part left work running (see :meth:`Part.run`)."""
        return all(s.get("drained", True) for s in self.stats.values())

    @property
    def exit_code(self) -> int:
        return 1 if self.failures else 0


class ProcessRunner:
    """Runs ``parts`` in threads until stopped or until one of them ends.

    ``name`` names the process in the ``<name>_stopping`` line a signal logs; ``counters``
    adds the process's counters to every ``<part>_stopped`` line; ``announce=False`` logs
    neither the started nor the stopped lines (a Lambda invocation reports its own).
    ``join_timeout`` bounds the wait for each part to wind down (None: as long as it takes).
    """

    def __init__(
        self,
        parts: Sequence[Part],
        *,
        name: str,
        counters: Callable[[], Stats] = dict,
        announce: bool = True,
        join_timeout: float | None = None,
    ) -> None:
        self.parts = list(parts)
        self.name = name
        self._counters = counters
        self._announce = announce
        self._join_timeout = join_timeout
        self._stop = threading.Event()

    def stop(self) -> None:
        """Stop every part (any thread; signal-handler safe)."""
        self._stop.set()

    def stop_on_signals(self) -> None:
        """SIGINT and SIGTERM stop the process (call from the main thread, before :meth:`run`)."""

        def on_signal(signum: int, _frame: FrameType | None) -> None:
            log_event(log, f"{self.name}_stopping", signal=signal.Signals(signum).name)
            self._stop.set()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)

    def run(self) -> Outcome:
        """Start every part, wait for the stop, wind every part down; their stats."""
        outcome = Outcome()
        threads = [self._start(part, outcome) for part in self.parts]
        while all(t.is_alive() for t in threads) and not self._stop.wait(_WATCH_INTERVAL_SEC):
            pass
        for part in self.parts:
            part.stop()
        for thread in threads:
            thread.join(self._join_timeout)
        return outcome

    def _start(self, part: Part, outcome: Outcome) -> threading.Thread:
        thread = threading.Thread(
            target=self._run_part, args=(part, outcome), name=part.name, daemon=True
        )
        if self._announce:
            log_event(log, f"{part.name}_started", **part.about)
        thread.start()
        return thread

    def _run_part(self, part: Part, outcome: Outcome) -> None:
        try:
            stats = outcome.stats[part.name] = part.run()
        except BaseException as exc:
            outcome.failures[part.name] = exc
            log_event(log, f"{part.name}_failed", logging.ERROR, error=str(exc))
            return
        if self._announce:
            log_event(log, f"{part.name}_stopped", **stats, **self._counters())

    def exit(self, outcome: Outcome) -> int:
        """The process's exit status; a process that left work running exits at once.

        Threads still blocked (a delivery to a target that does not answer) would keep the
        interpreter alive; the database owns their rows now (the stuck reclaimer).
        """
        if not outcome.drained:
            logging.shutdown()
            os._exit(outcome.exit_code)
        return outcome.exit_code


class LoopGroupPart:
    """A :class:`~chalicelib.runtime.group.LoopGroup` as a part: its loops until stopped.

    Its stats are each loop's total; :attr:`group` keeps the full :class:`LoopStats`.
    """

    def __init__(self, name: str, group: LoopGroup) -> None:
        self.name = name
        self.group = group
        self._stop = threading.Event()

    @property
    def about(self) -> Stats:
        return {"loops": [spec.name for spec in self.group.loops]}

    def run(self) -> Stats:
        return {loop: stats.total for loop, stats in self.group.run(self._stop).items()}

    def stop(self) -> None:
        self._stop.set()
