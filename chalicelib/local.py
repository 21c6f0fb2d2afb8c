"""The local stack (``make run``): API + worker + scheduler in one supervised process.

* Database: ``TE_DATABASE_URL`` if set, else the embedded PostgreSQL under ``TE_DATA_DIR``
  (started here, stopped on exit, data kept between runs). Migrations run at startup.
* API: Chalice's local server on ``TE_LISTEN_ADDR`` (unknown routes answer with the error
  envelope, as API Gateway's gateway responses do in AWS).
* Worker and scheduler: the same loops as Fargate/Lambda, in threads of this process; the
  API nudges the in-process worker when it queues an execution.
* Keys: ``TE_BOOTSTRAP_API_KEY`` and ``TE_SECRET_ENCRYPTION_KEY`` are generated once into
  the data dir when unset (local mode only) and printed/logged at startup.
* Ctrl-C (SIGINT) or SIGTERM stops claiming, drains, stops the server and the embedded
  database; nothing is left running.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

log = logging.getLogger("chalicelib.local")

_API_KEY_FILE = "api-key"


def _local_api_key(data_dir: Path) -> str:
    path = data_dir / _API_KEY_FILE
    if path.exists():
        return path.read_text(encoding="utf-8").strip()
    data_dir.mkdir(parents=True, exist_ok=True)
    key = "te_local_" + secrets.token_urlsafe(24)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(key + "\n")
    return key


def prepare_environment(env: dict[str, str] | None = None) -> str:
    """Set local-mode defaults in the environment; return the API key to print."""
    target = os.environ if env is None else env
    target.setdefault("TE_LOCAL_MODE", "true")
    target.setdefault("TE_ALLOW_PRIVATE_TARGETS", "true")
    data_dir = Path(target.get("TE_DATA_DIR", "./.te-data")).resolve()
    target["TE_DATA_DIR"] = str(data_dir)
    if not target.get("TE_BOOTSTRAP_API_KEY"):
        target["TE_BOOTSTRAP_API_KEY"] = _local_api_key(data_dir)
    return target["TE_BOOTSTRAP_API_KEY"]


def _envelope_handler() -> type:
    """Chalice's request handler, answering unknown routes with our 404 envelope."""
    from chalice.local import ChaliceRequestHandler, ForbiddenError

    from chalicelib.api.http import error_body

    class Handler(ChaliceRequestHandler):
        # Chalice writes headers and body in separate sends; with Nagle on, a keep-alive
        # client waits ~40 ms for the delayed ACK on every request.
        disable_nagle_algorithm = True

        def _send_error_response(self, error: Any) -> None:
            if isinstance(error, ForbiddenError):
                request_id = "req_" + secrets.token_hex(12)
                body = error_body(
                    "ROUTE_NOT_FOUND", f"No route for {self.command} {self.path}.", request_id
                )
                headers = {"Content-Type": "application/json", "X-Request-Id": request_id}
                self._send_http_response(404, headers, json.dumps(body))
                return
            super()._send_error_response(error)

        def send_error(
            self, code: int, message: str | None = None, explain: str | None = None
        ) -> None:
            """http.server's own errors (unsupported method, bad request line) as envelopes.

            It would answer with an HTML page; ``TRACE`` and any other method without a
            handler get 405 METHOD_NOT_ALLOWED like an unknown method on a known route.
            """
            if code == 501:  # no do_<METHOD>: a method no route has
                status, error = 405, "METHOD_NOT_ALLOWED"
            else:  # 400/414/431 and 505 (HTTP version): the request's fault, never a 5xx
                status, error = (code if code < 500 else 400), "INVALID_REQUEST"
            request_id = "req_" + secrets.token_hex(12)
            text = message or "The request could not be handled."
            body = json.dumps(error_body(error, text, request_id)).encode()
            self.close_connection = True
            # A request line that did not parse leaves http.server in HTTP/0.9 mode, which
            # sends no status line or headers; answer as HTTP/1.0 instead.
            self.request_version = "HTTP/1.0"
            self.send_response(status, text)
            self.send_header("Content-Type", "application/json")
            self.send_header("X-Request-Id", request_id)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD" and status >= 200 and status not in (204, 304):
                self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            log.info("http %s", format % args)

    return Handler


def make_api_server(host: str, port: int) -> Any:
    """A threaded local HTTP server for the Chalice app (also used by benchmarks)."""
    from chalice.config import Config
    from chalice.local import CustomLocalChalice, LocalChalice, LocalDevServer, ThreadedHTTPServer

    import app as app_module

    app_obj = app_module.app
    # What chalice.local.create_local_server does: make `current_request` thread-local.
    # Without it the threaded server shares one request object between concurrent requests
    # (bench/ saw replies carrying a neighbour's idempotency key).
    if not isinstance(app_obj, LocalChalice):
        CustomLocalChalice.__bases__ = (LocalChalice, app_obj.__class__)
        app_obj.__class__ = CustomLocalChalice
    config = Config.create(chalice_stage="dev", app_name="task-executor")
    server = LocalDevServer(
        app_obj,
        config,
        host,
        port,
        handler_cls=_envelope_handler(),
        server_cls=_backlog_server(ThreadedHTTPServer),
    )
    server.server.daemon_threads = True
    return server


def _backlog_server(base: type[Any]) -> type[Any]:
    """``base`` with an accept backlog of 128 instead of socketserver's 5: clients
    connecting in a burst otherwise lose handshakes and wait 1 s for the SYN retransmit."""
    return type("BacklogServer", (base,), {"request_queue_size": 128})


def _start(name: str, target: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread


def _banner(host: str, port: int, api_key: str) -> None:
    shown = "localhost" if host in ("0.0.0.0", "") else host  # noqa: S104
    url = f"http://{shown}:{port}"
    print(
        "\n".join(
            [
                "",
                f"Task Executor is running on {url}",
                f"API key: {api_key}",
                f"Try:     curl -s -H 'Authorization: Bearer {api_key}' {url}/endpoints",
                "OpenAPI: " + url + "/openapi.json    Stop: Ctrl-C",
                "",
            ]
        ),
        flush=True,
    )


def main() -> int:
    api_key = prepare_environment()
    from chalicelib import wiring
    from chalicelib.db.migrate import migrate
    from chalicelib.logs import configure_logging
    from chalicelib.settings import get_settings

    configure_logging()
    settings = get_settings()
    wiring.encryption_keys()  # generates the local key once, with a log line
    migrate(wiring.database("cli"))
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("stopping (signal %s)", signum)
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    # Import everything the threads need here, in the main thread, before any thread starts:
    # chalice.local pulls in six's meta-path importer, and a first import of http.server in
    # one thread racing urllib3's first import of http.client in another deadlocked on the
    # module locks (seen here, intermittently).
    host, port = settings.listen_host_port()
    server = make_api_server(host, port)
    import chalicelib.worker.dispatchers.http  # noqa: F401 - see above
    from chalicelib.scheduler.runner import run_scheduler_until
    from chalicelib.worker.runner import run_worker_until

    threads = [
        _start("worker", lambda: run_worker_until(stop, nudge_from_api=True)),
        _start("scheduler", lambda: run_scheduler_until(stop)),
        _start("api", server.server.serve_forever),
    ]
    _banner(host, port, api_key)
    stop.wait()
    server.shutdown()
    for thread in threads:
        thread.join(timeout=settings.worker_shutdown_timeout_sec + 5)
    wiring.reset()
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
