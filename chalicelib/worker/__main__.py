"""``python -m chalicelib.worker``: the long-running worker process (the Fargate shape).

SIGTERM or SIGINT stops claiming; in-flight deliveries get up to
``TE_WORKER_SHUTDOWN_TIMEOUT_SEC`` to finish and be recorded. Whatever is still running
then stays RUNNING in the database for the stuck reclaimer, and the process exits without
waiting for those delivery threads.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from types import FrameType

log = logging.getLogger("chalicelib.worker")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Usage and ``--help``, before anything is imported or connected."""
    parser = argparse.ArgumentParser(
        prog="python -m chalicelib.worker",
        description="The long-running worker (the Fargate shape): claims due executions and "
        "delivers them. Configured by TE_* environment variables (README, Settings); "
        "SIGTERM or SIGINT drains for up to TE_WORKER_SHUTDOWN_TIMEOUT_SEC.",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    parse_args(argv)
    from chalicelib import wiring
    from chalicelib.logs import log_event
    from chalicelib.settings import get_settings
    from chalicelib.worker import build_worker
    from chalicelib.worker.background import running_background

    wiring.configure_logging()
    settings = get_settings()
    worker = build_worker(settings=settings)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log_event(log, "worker_stopping", worker_id=worker.worker_id, signal=signum)
        worker.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log_event(
        log,
        "worker_started",
        worker_id=worker.worker_id,
        max_concurrent=settings.worker_max_concurrent,
        claim_strategy=settings.claim_strategy,
    )
    with running_background(worker, settings):
        worker.run()
        drained = worker.drain(settings.worker_shutdown_timeout_sec)
        left = worker.in_flight
        worker.close(abandon=not drained)
    log_event(
        log,
        "worker_stopped",
        worker_id=worker.worker_id,
        drained=drained,
        left_running=left,
        **wiring.database_stats(),
    )
    if not drained:
        # Delivery threads still blocked on a target would keep the interpreter alive;
        # their executions are RUNNING in the database and the reclaimer owns them now.
        logging.shutdown()
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
