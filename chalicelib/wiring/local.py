"""The local stack (``make run``): API + worker + scheduler in one supervised process.

* Database: ``TE_DATABASE_URL`` if set, else the embedded PostgreSQL in the data directory
  (``chalicelib.local_data``: ``./.te-data``, a link to a directory outside the project;
  started here, stopped on exit, data kept between runs). Migrations run at startup.
* API: Chalice's local server on ``TE_LISTEN_ADDR`` (``127.0.0.1:8080`` here: this mode
  allows private delivery targets, so it is not exposed beyond the machine by default),
  hardened against hostile clients (:mod:`chalicelib.local_server`).
* Worker and scheduler: the same parts as Fargate runs, in threads of this process; the
  API nudges the in-process worker when it queues an execution. ``--no-api`` runs only
  those two, beside a plain ``chalice local`` (which serves the API alone).
* Keys: ``TE_BOOTSTRAP_API_KEY`` and ``TE_SECRET_ENCRYPTION_KEY`` are generated once into
  the data dir when unset (local mode only); the API key is printed at startup.
* Ctrl-C (SIGINT) or SIGTERM stops claiming, drains, stops the server and the embedded
  database; nothing is left running.

One :class:`~chalicelib.wiring.process.ProcessRoot` serves all three parts: one set of
pools, one keyring, one clock.
"""

from __future__ import annotations

import argparse
import errno
import sys
from typing import Any

from chalicelib import wakeup
from chalicelib.db.migrate import migrate
from chalicelib.errors import ConfigurationError
from chalicelib.local_server import ApiServerPart, banner, make_api_server, prepare_environment
from chalicelib.runtime.process import Part, ProcessRunner
from chalicelib.wiring import scheduler, worker
from chalicelib.wiring.app import build_app
from chalicelib.wiring.process import ProcessRoot


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Usage and ``--help``, before anything is connected."""
    parser = argparse.ArgumentParser(
        prog="python -m chalicelib.local",
        description="The local stack (make run): API + worker + scheduler on an embedded "
        "PostgreSQL (or TE_DATABASE_URL). Ctrl-C stops everything.",
    )
    parser.add_argument(
        "--no-api",
        action="store_true",
        help="run only the worker and the scheduler, beside `chalice local` (the API alone)",
    )
    return parser.parse_args(argv)


def _bind_api(process: ProcessRoot, host: str, port: int) -> Any | None:
    """The API server bound to host:port, or None after one line saying why it cannot be."""
    try:
        return make_api_server(build_app(process), host, port)
    except OSError as exc:
        reason = "is already in use" if exc.errno == errno.EADDRINUSE else f": {exc.strerror}"
        print(
            f"error: cannot listen on {host}:{port}, port {port} {reason}; "
            "set TE_LISTEN_ADDR=host:port to use another (e.g. TE_LISTEN_ADDR=127.0.0.1:8081)",
            file=sys.stderr,
        )
        return None


def main(argv: list[str] | None = None) -> int:
    """``python -m chalicelib.local``: start the stack, run until Ctrl-C, stop it all."""
    args = parse_args(argv)
    prepare_environment()
    process = ProcessRoot()
    process.configure_logging()
    try:
        host, port = process.settings.listen_host_port()
    except ConfigurationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # Bind first: a busy port is reported before anything is started. Also imports, in
    # this thread, what the threads need: chalice.local pulls in six's meta-path importer,
    # and a first import of http.server in one thread racing urllib3's first import of
    # http.client in another deadlocked on the module locks (seen here, intermittently).
    server = None if args.no_api else _bind_api(process, host, port)
    if server is None and not args.no_api:
        return 1
    import chalicelib.worker.dispatchers.http  # noqa: F401 - see above

    worker_part = worker.long_lived_part(process)
    parts: list[Part] = [worker_part, scheduler.long_lived_part(process)]
    if server is not None:
        parts.insert(0, ApiServerPart(server))  # stopped first: no new work comes in
    runner = ProcessRunner(
        parts,
        name="local",
        counters=process.database_stats,
        join_timeout=process.settings.worker_shutdown_timeout_sec + 5,
    )
    runner.stop_on_signals()
    process.encryption_keys()  # generates the local key once, with a log line
    migrate(process.database("cli"))
    banner(host, port, process.bootstrap_api_key(), api=server is not None)
    # The API nudges the worker in this process when it queues an execution.
    unregister = wakeup.register(worker_part.worker.nudge) if server is not None else None
    try:
        outcome = runner.run()
    finally:
        if unregister is not None:
            unregister()
        process.close()
    return outcome.exit_code
