"""The local stack's API server (``make run``) and what ``chalice local`` needs.

* :func:`make_api_server`: Chalice's local server for an app, hardened against hostile
  clients (:mod:`chalicelib.local.http`): bodies over the API's limit refused before they
  are read, strict framing (chunked bodies decoded), a deadline per request and a shorter
  one for its head, bounded connections and handlers, long-polls capped to a share of
  the handlers; :class:`ApiServerPart` runs it as a part of the local stack.
* Unknown routes answer with the error envelope, as API Gateway's gateway responses do
  (:func:`use_error_envelope_for_unknown_routes`), under ``make run`` and under
  ``chalice local`` (:func:`adapt_to_chalice_cli`, which also sets the local-mode
  defaults; the deployed app never imports this module).

The stack itself (database, keys, worker, scheduler, signals) is composed in
:mod:`chalicelib.wiring.local`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from email.message import Message
from typing import Any

from chalicelib.api.context import ApiApp
from chalicelib.services.longpoll import WaitSlots, parse_prefer_wait

log = logging.getLogger("chalicelib.local")

LOCAL_LISTEN_ADDR = "127.0.0.1:8080"
#: The share of the handler slots requests that wait (``Prefer: wait``) may hold at once,
#: and the share of those one API key may hold: the rest answer other requests.
LONG_POLL_SHARE = 0.25
LONG_POLL_KEY_SHARE = 0.25


def prepare_environment(env: MutableMapping[str, str] | None = None) -> None:
    """Set local-mode defaults in the environment (no I/O: keys are made on first use)."""
    target = os.environ if env is None else env
    target.setdefault("TE_LOCAL_MODE", "true")
    target.setdefault("TE_ALLOW_PRIVATE_TARGETS", "true")
    target.setdefault("TE_LISTEN_ADDR", LOCAL_LISTEN_ADDR)


def adapt_to_chalice_cli() -> None:
    """Give ``chalice local`` what ``make run`` has. Called by the app's build (importing
    the app is the only hook ``chalice local`` offers) when Chalice's CLI runs it, never in
    Lambda: of the CLI's commands only ``chalice local`` serves requests."""
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
    from chalicelib.local.http import send_envelope

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


def _handler(timeout: float, app: ApiApp) -> type:
    """Chalice's request handler, tuned and hardened (:mod:`chalicelib.local.http`) for the
    local stack."""
    from chalice.local import ChaliceRequestHandler

    from chalicelib.local.http import FramedRequestHandler

    use_error_envelope_for_unknown_routes()

    class Handler(FramedRequestHandler, ChaliceRequestHandler):
        request_timeout = timeout

        def body_limit(self) -> int:
            return app.context.max_body_bytes

        # Chalice writes headers and body in separate sends; with Nagle on, a keep-alive
        # client waits ~40 ms for the delayed ACK on every request.
        disable_nagle_algorithm = True
        _body: bytes | None = None

        _may_wait = True

        def _generic_handle(self) -> None:
            self._body = self.read_body()
            if self._body is None:  # refused (and answered), or the client left
                return
            server: Any = self.server
            with server.handling(), _wait_slot(server.wait_slots, self.headers) as granted:
                self._may_wait = granted
                super()._generic_handle()

        # Chalice binds its do_* methods to its own _generic_handle: rebind them.
        do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = do_PATCH = do_OPTIONS = _generic_handle

        def _parse_payload(self) -> tuple[dict[str, Any], bytes | None]:
            # Chalice's own reads Content-Length again; the body is read (or decoded from
            # chunks) already, and the route sees it as if sent with a Content-Length.
            headers = dict(self.headers)
            if not self._may_wait:  # past the long-poll caps: answered without waiting
                headers = {k: v for k, v in headers.items() if k.lower() != "prefer"}
            if self._length is None:  # chunked
                headers = {k: v for k, v in headers.items() if k.lower() != "transfer-encoding"}
                headers["Content-Length"] = str(len(self._body or b""))
            return headers, self._body or None

        def log_message(self, format: str, *args: Any) -> None:
            # One line per request at DEBUG: an idle or polled stack stays quiet at INFO.
            log.debug("http %s", format % args)

    return Handler


@contextmanager
def _wait_slot(slots: WaitSlots, headers: Message) -> Iterator[bool]:
    """A long-poll slot for a request that asks to wait (``Prefer: wait``), by its key.

    The key is the Authorization header's hash (a request without a valid key is refused
    before it waits, but counts against the total meanwhile). Requests that do not ask
    to wait take no slot.
    """
    if parse_prefer_wait(headers.get("prefer")) is None:
        yield True
        return
    key = hashlib.sha256((headers.get("authorization") or "").encode()).hexdigest()
    with slots.holding(key) as granted:
        yield granted


def make_api_server(
    app: ApiApp,
    host: str,
    port: int,
    *,
    request_timeout: float | None = None,
    max_threads: int | None = None,
    max_handlers: int | None = None,
) -> Any:
    """A threaded local HTTP server for ``app`` (also used by tests and benchmarks).

    ``request_timeout`` (seconds a connection has to deliver each request),
    ``max_threads`` (connections open at once) and ``max_handlers`` (requests in the app
    at once) default to the constants of :mod:`chalicelib.local.http`. Long-polls may hold
    a quarter of the handlers, and one API key a quarter of those (:data:`LONG_POLL_SHARE`,
    :data:`LONG_POLL_KEY_SHARE`); past that a request asking to wait is answered at once.
    """
    from chalice.config import Config
    from chalice.local import CustomLocalChalice, LocalChalice, LocalDevServer, ThreadedHTTPServer

    from chalicelib.local import http as local_http

    app_obj: Any = app  # its class is swapped below, for one that is still an ApiApp
    # What chalice.local.create_local_server does: make `current_request` thread-local.
    # Without it the threaded server shares one request object between concurrent requests
    # (bench/ saw replies carrying a neighbour's idempotency key).
    if not isinstance(app_obj, LocalChalice):
        CustomLocalChalice.__bases__ = (LocalChalice, app_obj.__class__)
        app_obj.__class__ = CustomLocalChalice
    config = Config.create(chalice_stage="dev", app_name="task-executor")
    handlers = max_handlers or local_http.MAX_HANDLER_THREADS
    long_polls = max(1, int(handlers * LONG_POLL_SHARE))
    server_cls = type(
        "LocalApiServer",
        (local_http.BoundedThreads, ThreadedHTTPServer),
        {
            # An accept backlog of 128 instead of socketserver's 5: clients connecting in
            # a burst otherwise lose handshakes and wait 1 s for the SYN retransmit.
            "request_queue_size": 128,
            "max_threads": max_threads or local_http.MAX_CONNECTIONS,
            "max_handlers": handlers,
            "wait_slots": WaitSlots(
                total=long_polls, per_key=max(1, int(long_polls * LONG_POLL_KEY_SHARE))
            ),
        },
    )
    server = LocalDevServer(
        app_obj,
        config,
        host,
        port,
        handler_cls=_handler(request_timeout or local_http.REQUEST_TIMEOUT_SEC, app),
        server_cls=server_cls,
    )
    server.server.daemon_threads = True
    return server


#: What the banner says each profile runs beside the API.
PROFILE_SHAPES = {
    "full": "the worker and the scheduler running all the time, as on Fargate",
    "lean": "the worker and scheduler Lambda handlers invoked every minute, as EventBridge does",
}


def banner(host: str, port: int, api_key: str | None, api: bool, profile: str = "full") -> None:
    """What ``make run`` prints once the stack is up: where, the key, how to stop."""
    shown = "localhost" if host in ("0.0.0.0", "", "127.0.0.1") else host  # noqa: S104
    url = f"http://{shown}:{port}"
    if api:
        lines = [
            f"Task Executor is running on {url}",
            f"Profile: {profile} ({PROFILE_SHAPES.get(profile, profile)})",
            f"API key: {api_key}",
            f"Try:     curl -s -H 'Authorization: Bearer {api_key}' {url}/endpoints",
            f"Dashboard: {url}/ui    OpenAPI: {url}/openapi.json    Stop: Ctrl-C",
        ]
    else:
        lines = [
            "Task Executor worker and scheduler are running (the API: `chalice local`)",
            f"Profile: {profile} ({PROFILE_SHAPES.get(profile, profile)})",
            f"API key: {api_key}",
            "Stop: Ctrl-C",
        ]
    print("\n".join(["", *lines, ""]), flush=True)


class ApiServerPart:
    """The local API server as a part of the local stack (:mod:`chalicelib.runtime.process`)."""

    name = "api"

    def __init__(self, server: Any) -> None:
        self.server = server

    @property
    def about(self) -> dict[str, Any]:
        host, port = self.server.server.server_address[:2]
        return {"listen": f"{host}:{port}"}

    def run(self) -> dict[str, Any]:
        self.server.server.serve_forever()
        return {}

    def stop(self) -> None:
        self.server.shutdown()
