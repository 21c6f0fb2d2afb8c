"""The local stack (``make run``): API + worker + scheduler in one supervised process, in
the process shape of a deployment profile (``--profile``, default ``TE_PROFILE``, else
``full``; set into ``TE_PROFILE`` so ``GET /health`` reports it).

* Database: ``TE_DATABASE_URL`` if set, else the embedded PostgreSQL in the data directory
  (``chalicelib.local.data``: ``./.te-data``, a link to a directory outside the project;
  started here, stopped on exit, data kept between runs). Migrations run at startup.
* API: Chalice's local server on ``TE_LISTEN_ADDR`` (``127.0.0.1:8080`` here: this mode
  allows private delivery targets, so it is not exposed beyond the machine by default),
  hardened against hostile clients (:mod:`chalicelib.local.server`).
* Worker and scheduler, ``full``: the same parts as Fargate runs, in threads of this
  process; the API nudges the in-process worker when it queues an execution.
* Worker and scheduler, ``lean``: no long-lived part. A local EventBridge
  (:mod:`chalicelib.wiring.eventbridge`) invokes the profile's scheduled Lambda handlers
  at start and every minute (``--schedule-period``), each in containers of its own with
  the function's timeout and settings (``chalicelib.profiles``); the worker wakes by
  LISTEN/NOTIFY or polls, as in Lambda.
* ``--no-api`` runs only the worker and the scheduler, beside a plain ``chalice local``
  (which serves the API alone).
* Keys: ``TE_BOOTSTRAP_API_KEY`` and ``TE_SECRET_ENCRYPTION_KEY`` are generated once into
  the data dir when unset (local mode only); the API key is printed at startup.
* Ctrl-C (SIGINT) or SIGTERM stops claiming, drains, stops the server and the embedded
  database; nothing is left running.

One :class:`~chalicelib.wiring.process.ProcessRoot` serves the parts (in ``lean``, the
API; each Lambda container has a root of its own): one set of pools, one keyring, one clock.
"""

from __future__ import annotations

import argparse
import errno
import math
import os
import sys
from collections.abc import Callable
from typing import Any

from chalicelib import wakeup
from chalicelib.db.migrate import migrate
from chalicelib.errors import ConfigurationError
from chalicelib.local.server import ApiServerPart, banner, make_api_server, prepare_environment
from chalicelib.profiles import PROFILES, ScheduledFunction
from chalicelib.runtime.process import Part, ProcessRunner
from chalicelib.scheduler.lambdas import SCHEDULE_PERIOD_SEC
from chalicelib.wiring import scheduler, worker
from chalicelib.wiring.app import build_app
from chalicelib.wiring.eventbridge import LocalEventBridge
from chalicelib.wiring.lambdas import LambdaRoot
from chalicelib.wiring.process import ProcessRoot
from chalicelib.worker.worker import Worker


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
    parser.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        help="the deployment's process shape: full (long-lived worker and scheduler) or lean "
        "(the scheduled Lambda handlers invoked every minute, as EventBridge does); "
        "default: TE_PROFILE, else full",
    )
    parser.add_argument(
        "--schedule-period",
        type=_positive_seconds,
        default=SCHEDULE_PERIOD_SEC,
        metavar="SECONDS",
        help="lean: seconds between two invocations of each scheduled function "
        f"(default {SCHEDULE_PERIOD_SEC:g}, EventBridge's rate(1 minute); tests change it)",
    )
    return parser.parse_args(argv)


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


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


def lambda_container(process: ProcessRoot) -> Callable[[ScheduledFunction], LambdaRoot]:
    """Builds a Lambda container for a function: a root of its own over this process's
    environment, the stack's database and the function's settings overrides."""

    def build(function: ScheduledFunction) -> LambdaRoot:
        env = {**os.environ, "TE_DATABASE_URL": process.database_url(), **function.env}
        return LambdaRoot(ProcessRoot(env, clock=process.clock))

    return build


def profile_parts(process: ProcessRoot, period_sec: float) -> tuple[list[Part], Worker | None]:
    """The worker and scheduler parts of the profile's shape, and the worker to nudge
    (``full``: the in-process worker; ``lean``: none, the Lambda handlers wake by
    LISTEN/NOTIFY or poll)."""
    if process.settings.profile == "lean":
        bridge = LocalEventBridge(
            PROFILES["lean"], lambda_container(process), period_sec=period_sec
        )
        return [bridge], None
    worker_part = worker.long_lived_part(process)
    return [worker_part, scheduler.long_lived_part(process)], worker_part.worker


def main(argv: list[str] | None = None) -> int:
    """``python -m chalicelib.local``: start the stack, run until Ctrl-C, stop it all."""
    args = parse_args(argv)
    prepare_environment()
    if args.profile is not None:
        os.environ["TE_PROFILE"] = args.profile
    process = ProcessRoot()
    try:
        process.configure_logging()  # the settings' first read: a bad value is one line
        host, port = process.settings.listen_host_port()
        profile = process.settings.profile
    except ConfigurationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    os.environ["TE_PROFILE"] = profile  # /health reports it; the Lambda containers inherit it
    # Bind first: a busy port is reported before anything is started. Also imports, in
    # this thread, what the threads need: chalice.local pulls in six's meta-path importer,
    # and a first import of http.server in one thread racing urllib3's first import of
    # http.client in another deadlocked on the module locks (seen here, intermittently).
    server = None if args.no_api else _bind_api(process, host, port)
    if server is None and not args.no_api:
        return 1
    import chalicelib.worker.dispatchers.http  # noqa: F401 - see above

    parts, in_process_worker = profile_parts(process, args.schedule_period)
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
    banner(host, port, process.bootstrap_api_key(), api=server is not None, profile=profile)
    # full: the API nudges the worker in this process when it queues an execution.
    unregister = None
    if in_process_worker is not None and server is not None:
        unregister = wakeup.register(in_process_worker.nudge)
    try:
        outcome = runner.run()
    finally:
        if unregister is not None:
            unregister()
        process.close()
    return outcome.exit_code
