"""The states of a process's background loops, for its heartbeat to report.

One :class:`LoopRegistry` per process (or per scheduled invocation): the loop runner
records each iteration's outcome and the loop group each crash and restart
(:mod:`chalicelib.runtime.loop`, :mod:`chalicelib.runtime.group`); the worker records its
claim and finalize loops the same way. The heartbeat writer copies :meth:`snapshot` into
its row every beat (:mod:`chalicelib.health.heartbeat`), which is how ``GET /health`` and
``GET /metrics`` in any container learn that a loop of some process is down.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from chalicelib.db.faults import is_transient
from chalicelib.domain.clock import utcnow
from chalicelib.domain.loops import LoopPhase, LoopState


class LoopRegistry:
    """Thread-safe: loop name -> :class:`LoopState`."""

    def __init__(self, clock: Callable[[], datetime] = utcnow) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._states: dict[str, LoopState] = {}

    def _get(self, name: str) -> LoopState:
        return self._states.get(name) or LoopState(name=name)

    def running(self, name: str) -> None:
        """An iteration of ``name`` succeeded (or the loop started)."""
        with self._lock:
            self._states[name] = LoopState(name=name)

    def failed(self, name: str, exc: BaseException) -> LoopState:
        """An iteration of ``name`` raised ``exc``; returns the new state."""
        now = self._clock()
        with self._lock:
            state = self._get(name).failed(type(exc).__name__, transient=is_transient(exc), now=now)
            self._states[name] = state
            return state

    def crashed(self, name: str, exc: BaseException) -> LoopState:
        """The thread of ``name`` died on ``exc``; it waits to be restarted."""
        now = self._clock()
        with self._lock:
            state = self._states[name] = self._get(name).crashed(type(exc).__name__, now=now)
            return state

    def stopped(self, name: str) -> None:
        with self._lock:
            self._states[name] = replace(self._get(name), phase=LoopPhase.STOPPED)

    def state(self, name: str) -> LoopState:
        with self._lock:
            return self._get(name)

    def snapshot(self) -> tuple[LoopState, ...]:
        """Every loop's state, by name."""
        with self._lock:
            return tuple(self._states[name] for name in sorted(self._states))
