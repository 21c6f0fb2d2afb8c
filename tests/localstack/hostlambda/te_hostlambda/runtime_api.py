"""The server side of the Lambda Runtime API (2018-06-01) for one execution environment.

What the Lambda service (in LocalStack's containers: its runtime-init and the RIE) offers a
function's runtime: ``GET /runtime/invocation/next`` (a long poll that hands over the next
event), ``POST /runtime/invocation/<id>/response`` and ``.../error``, and
``POST /runtime/init/error``. Here a threaded HTTP server on 127.0.0.1, one per
environment; :meth:`RuntimeApi.submit` queues an invocation and returns a future of its
outcome. The runtime is ready when it first asks for the next invocation, as in AWS.
"""

from __future__ import annotations

import queue
import re
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PREFIX = "/2018-06-01/runtime"
_OUTCOME_PATH = re.compile(rf"^{PREFIX}/invocation/(?P<id>[^/]+)/(?P<kind>response|error)$")


@dataclass(frozen=True, kw_only=True)
class Invocation:
    """One event for the runtime, with the headers ``next`` sends along."""

    request_id: str
    payload: bytes
    function_arn: str
    trace_id: str
    deadline_ms: int


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """What the runtime posted for one invocation."""

    request_id: str
    body: bytes
    is_error: bool


class InitError(Exception):
    """The runtime reported ``/runtime/init/error`` (the handler did not load)."""

    def __init__(self, payload: bytes) -> None:
        super().__init__(payload.decode(errors="replace"))
        self.payload = payload


class RuntimeApi:
    """The Runtime API of one environment, on a free port of 127.0.0.1."""

    def __init__(self) -> None:
        self._pending: queue.Queue[Invocation | None] = queue.Queue()
        self._outcomes: dict[str, Future[Outcome]] = {}
        self._lock = threading.Lock()
        self.ready = threading.Event()
        self.init_error: bytes | None = None
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="host-lambda-runtime-api", daemon=True
        )

    @property
    def address(self) -> str:
        """``host:port``, what ``AWS_LAMBDA_RUNTIME_API`` holds."""
        host, port = self._server.server_address[:2]
        return f"{host}:{port}"

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        """Stop serving; a runtime still waiting in ``next`` gets no event."""
        self._pending.put(None)
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            outcomes, self._outcomes = self._outcomes, {}
        for future in outcomes.values():
            future.cancel()

    def submit(self, invocation: Invocation) -> Future[Outcome]:
        """Queue ``invocation`` for the runtime's next ``next``."""
        future: Future[Outcome] = Future()
        with self._lock:
            self._outcomes[invocation.request_id] = future
        self._pending.put(invocation)
        return future

    def next_invocation(self) -> Invocation | None:
        """Block until an invocation is queued (None: the environment is closing)."""
        self.ready.set()
        invocation = self._pending.get()
        if invocation is None:
            self._pending.put(None)  # every other waiter ends too
        return invocation

    def record(self, outcome: Outcome) -> bool:
        """The runtime's answer for one invocation; False for an unknown request id."""
        with self._lock:
            future = self._outcomes.pop(outcome.request_id, None)
        if future is None:
            return False
        future.set_result(outcome)
        return True

    def record_init_error(self, payload: bytes) -> None:
        self.init_error = payload
        self.ready.set()

    def forget(self, request_id: str) -> None:
        """Drop an invocation that is no longer awaited (it timed out)."""
        with self._lock:
            self._outcomes.pop(request_id, None)


def _handler_for(api: RuntimeApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            if self.path != f"{PREFIX}/invocation/next":
                self._reply(404, b'{"errorType": "InvalidRequest"}')
                return
            invocation = api.next_invocation()
            if invocation is None:
                self._reply(410, b'{"errorType": "EnvironmentClosing"}')
                return
            self._reply(
                200,
                invocation.payload,
                {
                    "Lambda-Runtime-Aws-Request-Id": invocation.request_id,
                    "Lambda-Runtime-Deadline-Ms": str(invocation.deadline_ms),
                    "Lambda-Runtime-Invoked-Function-Arn": invocation.function_arn,
                    "Lambda-Runtime-Trace-Id": invocation.trace_id,
                },
            )

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            if self.path == f"{PREFIX}/init/error":
                api.record_init_error(body)
                self._reply(202, b'{"status": "OK"}')
                return
            match = _OUTCOME_PATH.match(self.path)
            known = match is not None and api.record(
                Outcome(request_id=match["id"], body=body, is_error=match["kind"] == "error")
            )
            if known:
                self._reply(202, b'{"status": "OK"}')
            else:
                self._reply(400, b'{"errorType": "InvalidRequestID"}')

        def _reply(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            try:
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:
                self.close_connection = True  # the runtime is gone (its environment stopped)

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler
