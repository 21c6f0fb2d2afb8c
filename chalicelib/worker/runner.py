"""Run a worker in a thread of another process (the local stack, tests, benchmarks)."""

from __future__ import annotations

import logging
import threading

from chalicelib import wakeup
from chalicelib.logs import log_event
from chalicelib.worker import build_worker
from chalicelib.worker.background import running_background

log = logging.getLogger("chalicelib.worker")


def run_worker_until(stop: threading.Event, *, nudge_from_api: bool = False) -> None:
    """Run a worker built from settings until ``stop`` is set, then drain and close it.

    With ``nudge_from_api`` the worker claims as soon as code in this process calls
    :func:`chalicelib.wakeup.notify` (e.g. POST /jobs after its commit).
    """
    from chalicelib.settings import get_settings

    settings = get_settings()
    worker = build_worker(settings=settings)
    unregister = wakeup.register(worker.nudge) if nudge_from_api else None
    log_event(log, "worker_started", worker_id=worker.worker_id)
    try:
        with running_background(worker, settings):
            worker.run(stop)
            drained = worker.drain(settings.worker_shutdown_timeout_sec)
            worker.close(abandon=not drained)
        log_event(log, "worker_stopped", worker_id=worker.worker_id, drained=drained)
    finally:
        if unregister is not None:
            unregister()
