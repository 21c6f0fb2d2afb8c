"""The REST API: one Blueprint per resource, plus the middleware every request crosses.

The middleware gives every response a request id (``X-Request-Id`` header, and in every
error body), enforces the body size limit (413), authenticates (401), checks the key's
scope against the route (403, :func:`chalicelib.api.auth.authorize`) and rate-limits (429)
every route except ``GET /openapi.json`` and ``GET /health`` (load balancers call it
without a key), refuses query parameters the route does not declare (400, every route:
:func:`chalicelib.api.openapi.query_parameters`), and rewrites Chalice's own error
responses (405, 415, 500) into the specification's envelope.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from chalice import Response
from chalice.app import Request

from chalicelib.api.auth import PRINCIPAL_CONTEXT_KEY, authorize
from chalicelib.api.context import ApiApp, ApiContext
from chalicelib.api.http import contains_nul, error_body, error_response, new_request_id
from chalicelib.api.openapi import query_parameters
from chalicelib.errors import (
    InvalidRequest,
    MethodNotAllowed,
    PayloadTooLarge,
    TaskExecutorError,
    UnsupportedMediaType,
)

log = logging.getLogger(__name__)

#: Served without a key: the OpenAPI document, the load balancers' liveness probe and the
#: deployment's health check, and the dashboard's page and files (every data call the page
#: makes sends the key).
PUBLIC_ROUTES = frozenset(
    {
        ("GET", "/openapi.json"),
        ("GET", "/health"),
        ("GET", "/health/live"),
        ("GET", "/ui"),
        ("GET", "/ui/{name}"),
    }
)


def _native_error_to_envelope(response: Response, request_id: str) -> Response:
    """Chalice answers 405/415/500 itself with ``{"Code", "Message"}``: use our envelope."""
    body = response.body
    if response.status_code < 400 or not isinstance(body, dict) or "Code" not in body:
        return response
    mapped: TaskExecutorError
    if response.status_code == 405:
        mapped = MethodNotAllowed(str(body.get("Message", "Method not allowed.")))
    elif response.status_code == 415:
        mapped = UnsupportedMediaType("Content-Type must be application/json.")
    else:
        return Response(
            body=json.dumps(
                error_body("INTERNAL_ERROR", "An internal error occurred.", request_id)
            ),
            status_code=500,
            headers={"Content-Type": "application/json"},
        )
    headers = {k: v for k, v in response.headers.items() if k.lower() == "allow"}
    converted = error_response(mapped)
    converted.headers.update(headers)
    return converted


def refuse_unknown_query(request: Request, route: tuple[str, str]) -> None:
    """400 INVALID_REQUEST naming every query parameter the route does not declare in the
    OpenAPI document (a typo such as ``statuss=FAILED`` must not list every status)."""
    given = set(request.query_params or {})
    accepted = query_parameters().get(route)
    if not given or accepted is None:  # every route is documented (tests/integration)
        return
    unknown = sorted(given - accepted)
    if unknown:
        names = ", ".join(repr(name) for name in unknown)
        takes = ", ".join(sorted(accepted)) or "none"
        raise InvalidRequest(
            f"Unknown query parameter(s): {names}. {route[0]} {route[1]} accepts: {takes}."
        )


def _guard(request: Request, context: ApiContext) -> None:
    route = (request.method, request.context.get("resourcePath", ""))
    params = list((request.query_params or {}).values()) + list((request.uri_params or {}).values())
    if contains_nul(params):
        raise InvalidRequest("Query and path parameters must not contain NUL (%00).")
    raw = request.raw_body if request.method in ("POST", "PUT", "PATCH") else b""
    if raw and len(raw) > context.max_body_bytes:
        raise PayloadTooLarge(f"Request body exceeds {context.max_body_bytes} bytes.")
    if route in PUBLIC_ROUTES:
        refuse_unknown_query(request, route)
        return
    authenticator, limiter = context.guards()
    client = str((request.context.get("identity") or {}).get("sourceIp") or "")
    principal = authenticator.authenticate(request.headers.get("authorization"), client)
    limiter.check(principal.key_hash)
    authorize(principal, *route)
    refuse_unknown_query(request, route)
    request.context[PRINCIPAL_CONTEXT_KEY] = principal  # for rules that read the body too


def envelope_middleware(
    app: ApiApp, request: Request, get_response: Callable[[Request], Response]
) -> Any:
    """Request id, guards (:func:`_guard`) and the error envelope around every request."""
    request_id = new_request_id()
    try:
        _guard(request, app.context)
        response = get_response(request)
    except TaskExecutorError as exc:
        response = error_response(exc)
    except Exception:
        log.exception("unhandled error before the view ran")
        response = Response(
            body=json.dumps(
                error_body("INTERNAL_ERROR", "An internal error occurred.", request_id)
            ),
            status_code=500,
            headers={"Content-Type": "application/json"},
        )
    response = _native_error_to_envelope(response, request_id)
    response.headers["X-Request-Id"] = request_id
    return response


def register_api(app: ApiApp) -> None:
    """Attach the middleware and every resource blueprint to ``app``."""
    from chalicelib.api import (
        batches,
        configs,
        dead_letters,
        endpoints,
        executions,
        jobs,
        keys,
        meta,
        metrics,
        operations,
        overview,
        payload_specs,
        secrets,
        topics,
        ui,
    )

    def middleware(request: Request, get_response: Callable[[Request], Response]) -> Any:
        return envelope_middleware(app, request, get_response)

    app.register_middleware(middleware, "http")
    modules = (payload_specs, configs, secrets, endpoints, topics, jobs, batches, executions, meta)
    for module in (*modules, metrics, overview, ui, keys):
        app.register_blueprint(module.resource.blueprint)
    app.register_blueprint(dead_letters.resource.blueprint)
    app.register_blueprint(operations.resource.blueprint)
