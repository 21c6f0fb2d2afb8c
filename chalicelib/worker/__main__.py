"""``python -m chalicelib.worker``: the long-running worker process (the Fargate shape).

SIGTERM or SIGINT stops claiming; in-flight deliveries get up to
``TE_WORKER_SHUTDOWN_TIMEOUT_SEC`` to finish (:mod:`chalicelib.wiring.worker`).
"""

from __future__ import annotations

import argparse
import sys


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
    from chalicelib.wiring import worker  # after --help: it loads the worker

    return worker.main()


if __name__ == "__main__":
    sys.exit(main())
