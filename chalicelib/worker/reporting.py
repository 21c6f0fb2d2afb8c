"""What the worker reports: the log event of each finalized execution, and the state of
its claim loop for the process's heartbeat.

The claim loop (:meth:`chalicelib.worker.claimer.Claimer.run`) is not a
:class:`~chalicelib.runtime.loop.LoopSpec` (it sleeps on capacity and wake-ups, not on an
interval), so it reports to the worker's :class:`~chalicelib.runtime.registry.LoopRegistry`
through :class:`ClaimLoopHealth`: a claim that fails is logged once per streak
(:class:`~chalicelib.logs.FailureLog`), recorded as ``failing`` (the heartbeat carries it to
``/health`` and ``/metrics``), and followed by a pause: the poll interval while the database
is away or contended (the worker must come back as soon as it does), and a back-off that
doubles up to 30 s for anything else (a bug, or a row the claim's own isolation missed),
so a claim that fails every time does not spin.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid

from chalicelib.db.faults import is_transient
from chalicelib.domain.statuses import ExecutionStatus
from chalicelib.logs import FailureLog, log_event
from chalicelib.runtime.loop import Backoff
from chalicelib.runtime.registry import LoopRegistry
from chalicelib.worker.models import FinishedExecution

log = logging.getLogger("chalicelib.worker")

#: The worker's loops as its heartbeat names them.
CLAIM_LOOP = "claim"
FINALIZE_LOOP = "finalize"

_EVENTS = {
    ExecutionStatus.SUCCESS: ("execution_succeeded", logging.INFO),
    ExecutionStatus.RETRYING: ("execution_retrying", logging.WARNING),
    ExecutionStatus.FAILED: ("execution_failed", logging.ERROR),
}
_COUNTERS = {
    ExecutionStatus.SUCCESS: "succeeded",
    ExecutionStatus.RETRYING: "retrying",
    ExecutionStatus.FAILED: "failed",
}


def new_worker_id() -> str:
    """Unique per process and instance: host, pid and a random suffix."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def log_finalized(finished: FinishedExecution, applied: bool) -> str | None:
    """Log one finalized execution; the counter it adds to (None: its result was skipped)."""
    if not applied:
        log_event(
            log,
            "execution_finalize_skipped",
            level=logging.WARNING,
            execution_id=finished.execution_id,
            attempt=finished.attempt_number,
        )
        return None
    event, level = _EVENTS[finished.next_status]
    log_event(
        log,
        event,
        level=level,
        execution_id=finished.execution_id,
        endpoint=finished.endpoint,
        attempt=finished.attempt_number,
        duration_ms=finished.duration_ms,
        error_type=None if finished.error is None else finished.error.get("type"),
        retry_delay_ms=finished.retry_delay_ms,
        count=1,  # CloudWatch metric filters sum $.count (infra/stacks/observability.py)
    )
    return _COUNTERS[finished.next_status]


class ClaimLoopHealth:
    """The claim loop's failures: logged, recorded, and the pause before the next claim."""

    def __init__(self, registry: LoopRegistry, poll_interval_sec: float) -> None:
        self._registry = registry
        self._poll_interval = poll_interval_sec
        self._log = FailureLog(log, "claim (retrying every poll interval)")
        self._backoff = Backoff()
        self._streak = 0
        registry.running(CLAIM_LOOP)

    def succeeded(self) -> None:
        if self._streak:
            self._registry.running(CLAIM_LOOP)
        self._streak = 0
        self._log.succeeded()

    def failed(self, exc: Exception) -> float:
        """Record a failed claim; the seconds to wait before the next one."""
        self._streak += 1
        self._log.failed(exc)  # one traceback, then a line per 30 s
        self._registry.failed(CLAIM_LOOP, exc)
        if is_transient(exc):
            return self._poll_interval
        return self._backoff.delay(self._poll_interval, self._streak)
