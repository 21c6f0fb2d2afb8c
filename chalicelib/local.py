"""The local stack (``make run``): API + worker + scheduler in one supervised process.

* Database: ``TE_DATABASE_URL`` if set, else the embedded PostgreSQL in the data directory
  (``chalicelib.local_data``: ``./.te-data``, a link to a directory outside the project;
  started here, stopped on exit, data kept between runs). Migrations run at startup.
* API: Chalice's local server on ``TE_LISTEN_ADDR`` (``127.0.0.1:8080`` here: this mode
  allows private delivery targets, so it is not exposed beyond the machine by default).
  Unknown routes answer with the error envelope, as API Gateway's gateway responses do.
  Hardened against hostile clients (``chalicelib.local_http``): bodies over the API's limit
  refused before they are read, strict framing (chunked bodies decoded), a deadline per
  request, a bounded number of handler threads.
* Worker and scheduler: the same loops as Fargate/Lambda, in threads of this process; the
  API nudges the in-process worker when it queues an execution. ``--no-api`` runs only
  those two, beside a plain ``chalice local`` (which serves the API alone).
* Keys: ``TE_BOOTSTRAP_API_KEY`` and ``TE_SECRET_ENCRYPTION_KEY`` are generated once into
  the data dir when unset (local mode only); the API key is printed at startup.
* Ctrl-C (SIGINT) or SIGTERM stops claiming, drains, stops the server and the embedded
  database; nothing is left running.
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import secrets
import signal
import sys
import threading
from collections.abc import Callable, MutableMapping
from types import FrameType
from typing import Any

log = logging.getLogger("chalicelib.local")

LOCAL_LISTEN_ADDR = "127.0.0.1:8080"


def prepare_environment(env: MutableMapping[str, str] | None = None) -> None:
    """Set local-mode defaults in the environment (no I/O: keys are made on first use)."""
    target = os.environ if env is None else env
    target.setdefault("TE_LOCAL_MODE", "true")
    target.setdefault("TE_ALLOW_PRIVATE_TARGETS", "true")
    target.setdefault("TE_LISTEN_ADDR", LOCAL_LISTEN_ADDR)


def adapt_to_chalice_cli() -> None:
    """Give ``chalice local`` what ``make run`` has; a no-op anywhere else (Lambda).

    Chalice's CLI sets ``AWS_CHALICE_CLI_MODE`` (its documented way to tell the CLI from
    Lambda); of its commands only ``chalice local`` serves requests. Called from ``app.py``,
    because importing the app is the only hook ``chalice local`` offers.
    """
    if os.environ.get("AWS_CHALICE_CLI_MODE") != "true":
        return
    prepare_environment()
    use_error_envelope_for_unknown_routes()


def use_error_envelope_for_unknown_routes() -> None:
    """Chalice's local gateway answers an unknown route with 403 and AWS's signature-error
    text; answer 404 ``ROUTE_NOT_FOUND`` in the error envelope instead (as the deployed API's
    gateway responses do). Patches Chalice's local request handler once per process: with
    ``chalice local`` there is no other place to put it."""
    from chalice.local import ChaliceRequestHandler, ForbiddenError

    from chalicelib.api.http import error_body

    if getattr(ChaliceRequestHandler, "_te_envelope", False):
        return
    chalice_send_error = ChaliceRequestHandler._send_error_response

    def send_error(handler: Any, error: Any) -> None:
        if not isinstance(error, ForbiddenError):
            chalice_send_error(handler, error)
            return
        request_id = "req_" + secrets.token_hex(12)
        body = error_body(
            "ROUTE_NOT_FOUND", f"No route for {handler.command} {handler.path}.", request_id
        )
        headers = {"Content-Type": "application/json", "X-Request-Id": request_id}
        handler._send_http_response(404, headers, json.dumps(body))

    ChaliceRequestHandler._send_error_response = send_error  # type: ignore[assignment]
    ChaliceRequestHandler.send_error = _protocol_error
    ChaliceRequestHandler._te_envelope = True


def _protocol_error(
    handler: Any, code: int, message: str | None = None, explain: str | None = None
) -> None:
    """http.server's own errors (unsupported method, bad request line) as envelopes.

    It would answer with an HTML page; ``TRACE`` and any other method without a handler
    get 405 METHOD_NOT_ALLOWED like an unknown method on a known route, and a protocol
    error is the request's fault: 4xx, never a 5xx (http.server says 505 for HTTP/2.0).
    """
    from chalicelib.errors import InvalidRequest, MethodNotAllowed, TaskExecutorError
    from chalicelib.local_http import send_envelope

    text = message or "The request could not be handled."
    error: TaskExecutorError
    if code == 501:  # no do_<METHOD>: a method no route has
        error = MethodNotAllowed(text)
    else:
        error = InvalidRequest(text)
        error.status = code if code < 500 else 400
    # A request line that did not parse leaves http.server in HTTP/0.9 mode, which sends
    # no status line or headers; answer as HTTP/1.0 instead.
    handler.request_version = "HTTP/1.0"
    send_envelope(handler, error)


def _handler(timeout: float) -> type:
    """Chalice's request handler, tuned and hardened (``local_http``) for the local stack."""
    from chalice.local import ChaliceRequestHandler

    from chalicelib.local_http import FramedRequestHandler

    use_error_envelope_for_unknown_routes()

    class Handler(FramedRequestHandler, ChaliceRequestHandler):
        request_timeout = timeout
        # Chalice writes headers and body in separate sends; with Nagle on, a keep-alive
        # client waits ~40 ms for the delayed ACK on every request.
        disable_nagle_algorithm = True
        _body: bytes | None = None

        def _generic_handle(self) -> None:
            self._body = self.read_body()
            if self._body is not None:  # else refused (and answered) or the client left
                super()._generic_handle()

        # Chalice binds its do_* methods to its own _generic_handle: rebind them.
        do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = do_PATCH = do_OPTIONS = _generic_handle

        def _parse_payload(self) -> tuple[dict[str, Any], bytes | None]:
            # Chalice's own reads Content-Length again; the body is read (or decoded from
            # chunks) already, and the route sees it as if sent with a Content-Length.
            headers = dict(self.headers)
            if self._length is None:  # chunked
                headers = {k: v for k, v in headers.items() if k.lower() != "transfer-encoding"}
                headers["Content-Length"] = str(len(self._body or b""))
            return headers, self._body or None

        def log_message(self, format: str, *args: Any) -> None:
            # One line per request at DEBUG: an idle or polled stack stays quiet at INFO.
            log.debug("http %s", format % args)

    return Handler


def make_api_server(
    host: str,
    port: int,
    *,
    request_timeout: float | None = None,
    max_threads: int | None = None,
) -> Any:
    """A threaded local HTTP server for the Chalice app (also used by benchmarks).

    ``request_timeout`` (seconds a connection has to deliver each request) and
    ``max_threads`` (connections served at once) default to ``local_http``'s constants.
    """
    from chalice.config import Config
    from chalice.local import CustomLocalChalice, LocalChalice, LocalDevServer, ThreadedHTTPServer

    import app as app_module
    from chalicelib import local_http

    app_obj = app_module.app
    # What chalice.local.create_local_server does: make `current_request` thread-local.
    # Without it the threaded server shares one request object between concurrent requests
    # (bench/ saw replies carrying a neighbour's idempotency key).
    if not isinstance(app_obj, LocalChalice):
        CustomLocalChalice.__bases__ = (LocalChalice, app_obj.__class__)
        app_obj.__class__ = CustomLocalChalice
    config = Config.create(chalice_stage="dev", app_name="task-executor")
    server_cls = type(
        "LocalApiServer",
        (local_http.BoundedThreads, ThreadedHTTPServer),
        {
            # An accept backlog of 128 instead of socketserver's 5: clients connecting in
            # a burst otherwise lose handshakes and wait 1 s for the SYN retransmit.
            "request_queue_size": 128,
            "max_threads": max_threads or local_http.MAX_HANDLER_THREADS,
        },
    )
    server = LocalDevServer(
        app_obj,
        config,
        host,
        port,
        handler_cls=_handler(request_timeout or local_http.REQUEST_TIMEOUT_SEC),
        server_cls=server_cls,
    )
    server.server.daemon_threads = True
    return server


def _start(name: str, target: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread


def _banner(host: str, port: int, api_key: str | None, api: bool) -> None:
    shown = "localhost" if host in ("0.0.0.0", "", "127.0.0.1") else host  # noqa: S104
    url = f"http://{shown}:{port}"
    if api:
        lines = [
            f"Task Executor is running on {url}",
            f"API key: {api_key}",
            f"Try:     curl -s -H 'Authorization: Bearer {api_key}' {url}/endpoints",
            f"Dashboard: {url}/ui    OpenAPI: {url}/openapi.json    Stop: Ctrl-C",
        ]
    else:
        lines = [
            "Task Executor worker and scheduler are running (the API: `chalice local`)",
            f"API key: {api_key}",
            "Stop: Ctrl-C",
        ]
    print("\n".join(["", *lines, ""]), flush=True)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
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


def _bind_api(host: str, port: int) -> Any | None:
    """The API server bound to host:port, or None after one line saying why it cannot be."""
    try:
        return make_api_server(host, port)
    except OSError as exc:
        reason = "is already in use" if exc.errno == errno.EADDRINUSE else f": {exc.strerror}"
        print(
            f"error: cannot listen on {host}:{port}, port {port} {reason}; "
            "set TE_LISTEN_ADDR=host:port to use another (e.g. TE_LISTEN_ADDR=127.0.0.1:8081)",
            file=sys.stderr,
        )
        return None


def _stop_on_signals() -> threading.Event:
    """An event set by SIGINT or SIGTERM (installed before anything is started)."""
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("stopping (signal %s)", signum)
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    return stop


def _run_until(stop: threading.Event, server: Any | None, shutdown_timeout: float) -> None:
    from chalicelib.scheduler.runner import run_scheduler_until
    from chalicelib.worker.runner import run_worker_until

    threads = [
        _start("worker", lambda: run_worker_until(stop, nudge_from_api=server is not None)),
        _start("scheduler", lambda: run_scheduler_until(stop)),
    ]
    if server is not None:
        threads.append(_start("api", server.server.serve_forever))
    # Wake up now and then: the kernel may deliver SIGINT to any thread, and then only
    # flags it for the main thread, whose handler would never run during an endless wait
    # (Ctrl-C was ignored now and then).
    while not stop.wait(0.2):
        pass
    if server is not None:
        server.shutdown()
    for thread in threads:
        thread.join(timeout=shutdown_timeout + 5)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    prepare_environment()
    from chalicelib import wiring
    from chalicelib.db.migrate import migrate
    from chalicelib.errors import ConfigurationError
    from chalicelib.settings import get_settings

    wiring.configure_logging()
    try:
        settings = get_settings()
        host, port = settings.listen_host_port()
    except ConfigurationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # Bind first: a busy port is reported before anything is started. Also imports, in
    # this thread, what the threads need: chalice.local pulls in six's meta-path importer,
    # and a first import of http.server in one thread racing urllib3's first import of
    # http.client in another deadlocked on the module locks (seen here, intermittently).
    server = None if args.no_api else _bind_api(host, port)
    if server is None and not args.no_api:
        return 1
    import chalicelib.worker.dispatchers.http  # noqa: F401 - see above

    stop = _stop_on_signals()
    wiring.encryption_keys()  # generates the local key once, with a log line
    migrate(wiring.database("cli"))
    _banner(host, port, wiring.bootstrap_api_key(), api=server is not None)
    _run_until(stop, server, settings.worker_shutdown_timeout_sec)
    wiring.reset()
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
