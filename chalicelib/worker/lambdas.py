"""The long-poll worker Lambda: runs the worker loop for most of one invocation.

EventBridge invokes ``run_worker`` every minute. It claims and delivers until the
invocation's remaining time drops below a margin, then stops claiming and drains what is in
flight, so consecutive invocations hand over without leaving work RUNNING. The margin is
the smaller of :data:`MAX_MARGIN_MS` (room for the longest delivery plus the final
finalize) and half of the invocation's budget. The worker is built once per container and
reused by warm invocations.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from chalice import Blueprint

from chalicelib.logs import log_event

bp = Blueprint(__name__)
log = logging.getLogger("chalicelib.worker")

MAX_MARGIN_MS = 20_000
#: Left for returning after the drain (logs flushed, response sent).
EXIT_RESERVE_MS = 500

_lock = threading.Lock()
_worker: Any = None


def _shared_worker() -> Any:
    global _worker  # one worker per Lambda container, built on first invocation
    with _lock:
        if _worker is None:
            from chalicelib.wiring import configure_logging
            from chalicelib.worker import build_worker

            configure_logging()
            _worker = build_worker()
        return _worker


def reset_shared_worker() -> None:
    """Stop and forget the container's worker (tests; settings changed)."""
    global _worker  # see _shared_worker
    with _lock:
        worker, _worker = _worker, None
    if worker is not None:
        worker.stop()
        worker.close(abandon=not worker.drain(5))


def run_invocation(worker: Any, context: Any) -> dict[str, Any]:
    """Run ``worker`` until the remaining time is below the margin, then drain."""
    budget = int(context.get_remaining_time_in_millis())
    margin = min(MAX_MARGIN_MS, budget // 2)
    worker.run(until=lambda: context.get_remaining_time_in_millis() < margin)
    left_ms = context.get_remaining_time_in_millis() - EXIT_RESERVE_MS
    drained = worker.drain(max(0, left_ms) / 1000)
    result = {"worker_id": worker.worker_id, "drained": drained, "in_flight": worker.in_flight}
    log_event(log, "worker_invocation_done", **result)
    return result


@bp.schedule("rate(1 minute)", name="run_worker")
def run_worker(event: Any) -> dict[str, Any]:
    """Scheduled entry point: one long-poll session of the shared worker."""
    return run_invocation(_shared_worker(), event.context)
