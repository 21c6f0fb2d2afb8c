"""``python -m chalicelib.scheduler``: every scheduler loop as one long-lived process.

SIGTERM or SIGINT: each loop finishes its current iteration, a final ``DEAD`` heartbeat is
written, and the process exits 0. A loop whose iteration fails backs off, and one whose
thread dies is restarted by the group (``chalicelib.runtime.group``); the process exits 1
only if a loop died on a ``SystemExit``-like exception. Several such processes may run at
once: every loop is idempotent, no leader election is needed.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from types import FrameType

log = logging.getLogger("chalicelib.scheduler")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Usage and ``--help``, before anything is imported or connected."""
    parser = argparse.ArgumentParser(
        prog="python -m chalicelib.scheduler",
        description="Every scheduler loop (cron materializer, delayed promoter, stuck "
        "reclaimer, health stubs) as one long-lived process. Configured by TE_* environment "
        "variables; SIGTERM or SIGINT stops it after the current iteration.",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    parse_args(argv)
    from chalicelib.errors import TaskExecutorError
    from chalicelib.logs import log_event
    from chalicelib.wiring import configure_logging

    configure_logging()
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log_event(log, "scheduler_stopping", signal=signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    from chalicelib.scheduler.runner import build_scheduler

    log_event(log, "scheduler_started")
    try:
        stats = build_scheduler().run(stop)
    except TaskExecutorError as exc:
        log_event(log, "scheduler_failed", logging.ERROR, error=str(exc))
        return 1
    from chalicelib import wiring

    totals = {name: s.total for name, s in stats.items()}
    log_event(log, "scheduler_stopped", **totals, **wiring.database_stats())
    return 0


if __name__ == "__main__":
    sys.exit(main())
