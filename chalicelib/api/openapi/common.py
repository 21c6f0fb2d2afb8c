"""Pieces every fragment of the OpenAPI document uses: shared components and builders.

The error envelope, the pagination parameters and the shared error responses are
components (``#/components/...``); the builders below write the references to them, so a
fragment names a schema or a response once and never spells a ``$ref`` by hand.
"""

from __future__ import annotations

import re
from typing import Any

from chalicelib.services.longpoll import MAX_WAIT_SECONDS

TIMESTAMP = {"type": ["string", "null"], "format": "date-time"}
#: An ISO 8601 instant with an offset, never null (a filter's bound).
INSTANT = {"type": "string", "format": "date-time"}
PAGE = [{"$ref": "#/components/parameters/Limit"}, {"$ref": "#/components/parameters/Cursor"}]
PREFER_WAIT = {
    "name": "Prefer",
    "in": "header",
    "required": False,
    "description": "RFC 7240 `wait=N`: answer once terminal or after N s (max "
    f"{MAX_WAIT_SECONDS}); echoed in `Preference-Applied`. Malformed values are ignored.",
    "schema": {"type": "string", "example": "wait=10"},
}


def schema_ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def json_content(ref: str) -> dict[str, Any]:
    """``content`` of a JSON body with a component schema."""
    return {"application/json": {"schema": schema_ref(ref)}}


def request_body(ref: str) -> dict[str, Any]:
    """A required JSON request body with a component schema."""
    return {"required": True, "content": json_content(ref)}


def response_ref(name: str, description: str | None = None) -> dict[str, Any]:
    """A shared response (``#/components/responses/<name>``), optionally re-described."""
    ref: dict[str, Any] = {"$ref": f"#/components/responses/{name}"}
    if description:
        ref["description"] = description
    return ref


def path_param(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


def query_param(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema}


def page_of(ref: str) -> dict[str, Any]:
    """The ``{"items", "cursor"}`` list shape around a component schema."""
    return {
        "type": "object",
        "required": ["items", "cursor"],
        "properties": {
            "items": {"type": "array", "items": schema_ref(ref)},
            "cursor": {"type": ["string", "null"]},
        },
    }


_ERROR_STATUS = {
    "BadRequest": "400",
    "Unauthorized": "401",
    "NotFound": "404",
    "Conflict": "409",
    "PayloadTooLarge": "413",
    "Unprocessable": "422",
}

#: (path, method, operation object): what :func:`operation` builds and :func:`paths` files.
Operation = tuple[str, str, dict[str, Any]]


#: W3C trace context headers a request that creates jobs may carry: the jobs keep them.
TRACE_CONTEXT = (
    {
        "name": "traceparent",
        "in": "header",
        "required": False,
        "schema": {"type": "string"},
        "description": "W3C trace context: kept with the jobs created (a job's own "
        "headers.traceparent wins); every delivery attempt sends the same trace-id with a "
        "parent-id of its own. A malformed value is ignored. Where an OpenTelemetry exporter "
        "is configured, this call, each claim and each attempt are spans of the trace.",
    },
    {
        "name": "tracestate",
        "in": "header",
        "required": False,
        "schema": {"type": "string"},
        "description": "W3C tracestate, sent unchanged with each attempt (with a valid "
        "traceparent only).",
    },
)


def operation(
    method: str,
    path: str,
    op_id: str,
    ok: str,
    summary: str,
    *,
    errors: tuple[str, ...] = (),
    wait: bool = False,
    paged: bool = False,
    query: tuple[dict[str, Any], ...] = (),
    body: str | None = None,
    **extra: Any,
) -> Operation:
    """An operation answering 200 with schema ``ok``; its parameters and shared errors follow
    from its shape, ``errors`` adds the others.

    Parameters: the path's, then ``Prefer`` (``wait``), ``limit``/``cursor`` (``paged``),
    then ``query``. Errors: 401 always; 400 with a page, a query or a body; 404 with a path
    parameter; 413 with a body (``body`` names the request schema).
    """
    implied = {
        "Unauthorized": True,
        "BadRequest": bool(paged or query or body),
        "NotFound": "{" in path,
        "PayloadTooLarge": body is not None,
    }
    responses: dict[str, Any] = {"200": {"description": summary, "content": json_content(ok)}}
    for name, status in _ERROR_STATUS.items():
        if implied.get(name) or name in errors:
            responses[status] = response_ref(name)
    parameters = [path_param(name) for name in re.findall(r"{(\w+)}", path)]
    parameters += [PREFER_WAIT] if wait else []
    parameters += [*PAGE, *query] if paged else [*query]
    built = {"operationId": op_id, "summary": summary, "responses": responses, **extra}
    if parameters:
        built["parameters"] = parameters
    if body is not None:
        built["requestBody"] = request_body(body)
    return path, method.lower(), built


def paths(*operations: Operation) -> dict[str, Any]:
    """``{path: {method: operation}}`` from built operations."""
    items: dict[str, Any] = {}
    for path, method, built in operations:
        items.setdefault(path, {})[method] = built
    return items


ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "request_id"],
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "request_id": {"type": "string", "pattern": "^req_"},
            },
        }
    },
}

#: Pages end at their byte budget too (:data:`chalicelib.api.pagination.ITEMS_BUDGET`).
LIMIT_DESCRIPTION = (
    "Most items a page holds. A page also ends early, with its `cursor`, when the next item "
    "would carry its encoded items past 4 MiB, so every response stays under 5 MB (Lambda "
    "refuses 6 MB); an item past 4 MiB on its own has its fields of more than 64 KiB null "
    "and listed with their sizes in `omitted`."
)

COMMON_PARAMETERS = {
    "Limit": {
        "name": "limit",
        "in": "query",
        "required": False,
        "description": LIMIT_DESCRIPTION,
        "schema": {"type": "integer", "minimum": 1, "maximum": 200, "default": 50},
    },
    "Cursor": {
        "name": "cursor",
        "in": "query",
        "required": False,
        "description": "Opaque cursor from the previous page's `cursor`.",
        "schema": {"type": "string"},
    },
}

COMMON_RESPONSES = {
    name: {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }
    for name, description in {
        "BadRequest": "INVALID_REQUEST: malformed body or parameters.",
        "Unauthorized": "UNAUTHORIZED: missing or invalid API key.",
        "Forbidden": "INSUFFICIENT_SCOPE: the API key's scope does not allow this route.",
        "NotFound": "A *_NOT_FOUND code for the resource.",
        "Conflict": "CONFLICT, JOB_NOT_UPDATABLE, JOB_NOT_TRIGGERABLE, JOB_NOT_PAUSABLE, "
        "EXECUTION_NOT_CANCELLABLE or INVALID_TRANSITION.",
        "PayloadTooLarge": "PAYLOAD_TOO_LARGE: body over the size limit.",
        "Unprocessable": "A 422 validation code (INVALID_SCHEMA, INVALID_CRON, ...).",
        "RateLimited": "RATE_LIMITED: slow down; see Retry-After.",
        "InternalError": "INTERNAL_ERROR.",
    }.items()
}
