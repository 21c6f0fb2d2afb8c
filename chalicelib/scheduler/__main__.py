"""``python -m chalicelib.scheduler``: every scheduler loop as one long-lived process.

SIGTERM or SIGINT stops it after the current iterations (:mod:`chalicelib.wiring.scheduler`).
"""

from __future__ import annotations

import argparse
import sys


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
    from chalicelib.wiring import scheduler  # after --help: it loads the loops

    return scheduler.main()


if __name__ == "__main__":
    sys.exit(main())
