"""The local EventBridge (``make run PROFILE=lean``): a profile's scheduled Lambda functions
invoked as AWS invokes them, so the local stack runs the deployed process shape.

* Schedule: every function at start, then every ``period_sec`` (60 s: EventBridge's
  ``rate(1 minute)``); a schedule that fell behind (a suspended laptop) skips the missed
  periods instead of firing them all at once.
* Each invocation runs in a thread of its own, in a **container**: a
  :class:`~chalicelib.wiring.lambdas.LambdaRoot` over a
  :class:`~chalicelib.wiring.process.ProcessRoot` with the function's settings overrides
  (``chalicelib.profiles``), kept warm for the function's next invocation. An invocation
  that starts while the previous one still runs (the worker's 80 s timeout is longer than
  the minute) gets another container, as AWS runs it in another: each function keeps a
  small pool and reuses an idle container.
* Context: :class:`InvocationContext`, whose ``get_remaining_time_in_millis()`` counts down
  from the function's deployed timeout.
* Logs: one ``scheduled_invocation`` line per invocation at DEBUG, a failure at WARNING
  (``scheduled_invocation_failed``, with the function's name); a failed invocation is one
  Lambda error, and the next period invokes the function again.
* Stop (Ctrl-C): scheduling stops, every running invocation's deadline is put in the past
  (the handlers stop as at their deadline: the worker stops claiming, a scheduler loop
  ends after its current wait, at most its function's budget), the invocation threads are
  joined and every container is closed (the worker drains for up to 5 s).

It is a :class:`~chalicelib.runtime.process.Part` of the local stack's process runner.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from chalicelib.logs import log_event
from chalicelib.profiles import ScheduledFunction
from chalicelib.runtime.loop import LoopClock
from chalicelib.scheduler.lambdas import SCHEDULE_PERIOD_SEC

log = logging.getLogger("chalicelib.local")


class InvocationContext:
    """The Lambda context a handler reads: the function's name and its time left, counting
    down from the function's timeout; :meth:`cut` ends the time at once (a stopping stack).

    Past the deadline the time left is negative, where AWS would have ended the invocation:
    a handler that reads its budget only then (still building its container when the stack
    stopped) sees it spent, however it computes its margin.
    """

    def __init__(
        self,
        function_name: str,
        timeout_sec: float,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.function_name = function_name
        self._monotonic = monotonic
        self._deadline = monotonic() + timeout_sec

    def get_remaining_time_in_millis(self) -> int:
        return int((self._deadline - self._monotonic()) * 1000)

    def cut(self) -> None:
        """The deadline passed a second ago: every handler reads its time as spent."""
        self._deadline = min(self._deadline, self._monotonic() - 1.0)


class Container(Protocol):
    """One warm Lambda container (:class:`~chalicelib.wiring.lambdas.LambdaRoot`)."""

    def invoke(self, function: str, context: Any) -> Mapping[str, Any]: ...

    def close(self) -> None: ...


#: Builds a new container for a function (its env overrides applied).
ContainerFactory = Callable[[ScheduledFunction], Container]


class FunctionPool:
    """One function's containers: an idle one serves the next invocation, a new one is
    built only when every container is busy (an overlapping invocation)."""

    def __init__(self, function: ScheduledFunction, new_container: ContainerFactory) -> None:
        self.function = function
        self._new_container = new_container
        self._lock = threading.Lock()
        self._idle: list[Container] = []
        self._open: list[Container] = []
        #: containers built so far
        self.built = 0

    def acquire(self) -> Container:
        """An idle container, else a new one (now busy until :meth:`release`)."""
        with self._lock:
            if self._idle:
                return self._idle.pop()
        container = self._new_container(self.function)
        with self._lock:
            self._open.append(container)
            self.built += 1
        return container

    def release(self, container: Container) -> None:
        with self._lock:
            self._idle.append(container)

    def close(self) -> None:
        """Close every container (their invocations have returned)."""
        with self._lock:
            containers, self._open, self._idle = self._open, [], []
        for container in containers:
            try:
                container.close()
            except Exception as exc:
                log_event(
                    log,
                    "container_close_failed",
                    logging.WARNING,
                    function=self.function.name,
                    error=str(exc),
                )


class LocalEventBridge:
    """Invokes ``functions`` at start and every ``period_sec`` until :meth:`stop`.

    ``clock`` times the schedule and the contexts' countdowns (tests pass a fake one).
    """

    name = "eventbridge"

    def __init__(
        self,
        functions: Mapping[str, ScheduledFunction],
        new_container: ContainerFactory,
        *,
        period_sec: float = SCHEDULE_PERIOD_SEC,
        clock: LoopClock | None = None,
    ) -> None:
        if period_sec <= 0:
            raise ValueError(f"period_sec must be positive, got {period_sec}")
        self.period_sec = period_sec
        self.pools = {fn.name: FunctionPool(fn, new_container) for fn in functions.values()}
        self._clock = clock or LoopClock()
        self._monotonic = self._clock.monotonic
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._running: dict[threading.Thread, InvocationContext] = {}
        self._numbers = itertools.count(1)
        self.invocations = 0
        self.failures = 0

    @property
    def about(self) -> dict[str, Any]:
        return {"functions": list(self.pools), "period_sec": self.period_sec}

    def run(self) -> dict[str, Any]:
        """Invoke every function each period until stopped; then stop what runs, close all."""
        due = self._monotonic()
        try:
            while not self._stop.is_set():
                for pool in self.pools.values():
                    self._start(pool)
                due += self.period_sec
                now = self._monotonic()
                if due < now:  # fell behind: on to the next period, no burst of missed ones
                    due += ((now - due) // self.period_sec + 1) * self.period_sec
                self._clock.wait(self._stop, due - now)
        finally:
            self._wind_down()
        return {
            "invocations": self.invocations,
            "failures": self.failures,
            "containers": {name: pool.built for name, pool in self.pools.items()},
        }

    def stop(self) -> None:
        self._stop.set()

    @property
    def running(self) -> int:
        """Invocations running now."""
        with self._lock:
            return sum(thread.is_alive() for thread in self._running)

    def _start(self, pool: FunctionPool) -> None:
        function = pool.function
        context = InvocationContext(function.name, function.timeout_sec, monotonic=self._monotonic)
        thread = threading.Thread(
            target=self._invoke,
            args=(pool, context),
            name=f"te-lambda-{function.name}-{next(self._numbers)}",
            # Joined when the stack stops; daemon only so that a handler hung past its
            # timeout (which AWS would kill) cannot keep the process from exiting.
            daemon=True,
        )
        with self._lock:
            self._running = {t: c for t, c in self._running.items() if t.is_alive()}
            self._running[thread] = context
        thread.start()

    def _invoke(self, pool: FunctionPool, context: InvocationContext) -> None:
        name = pool.function.name
        started = self._monotonic()
        try:
            container = pool.acquire()
            try:
                result = container.invoke(name, context)
            finally:
                pool.release(container)
        except Exception as exc:
            with self._lock:
                self.invocations += 1
                self.failures += 1
            log_event(
                log,
                "scheduled_invocation_failed",
                logging.WARNING,
                function=name,
                error=f"{type(exc).__name__}: {exc}",
            )
            log.debug("invocation of %s failed", name, exc_info=exc)
            return
        with self._lock:
            self.invocations += 1
        log_event(
            log,
            "scheduled_invocation",
            logging.DEBUG,
            function=name,
            duration_ms=round((self._monotonic() - started) * 1000),
            result=dict(result),
        )

    def _wind_down(self) -> None:
        """Cut every running invocation's time, wait for each to return, close containers."""
        with self._lock:
            running = list(self._running.items())
        for _thread, context in running:
            context.cut()
        for thread, context in running:
            # Its time is spent: a handler returns at its next check, within its timeout.
            thread.join(self.pools[context.function_name].function.timeout_sec)
            if thread.is_alive():
                log_event(log, "invocation_left_running", logging.WARNING, thread=thread.name)
        for pool in self.pools.values():
            pool.close()
