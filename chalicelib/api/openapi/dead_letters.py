"""OpenAPI for dead letters: ``GET /executions``, ``POST /executions/{id}/retry`` and
``POST /endpoints/{name}/redrive``."""

from __future__ import annotations

from typing import Any

from chalicelib.api.openapi.common import (
    INSTANT,
    TIMESTAMP,
    Operation,
    operation,
    page_of,
    paths,
    query_param,
    response_ref,
    schema_ref,
)
from chalicelib.api.openapi.executions import EXECUTION_STATUS
from chalicelib.domain.dead_letters import ERROR_TYPE as ERROR_TYPE_PATTERN

#: The ``error_type`` a filter names (the dead-letter list's and a bulk operation's).
ERROR_TYPE = {"type": "string", "pattern": f"^{ERROR_TYPE_PATTERN.pattern}$"}
_LIST = (
    "List executions across jobs, newest first (created_at). status=FAILED is the "
    "dead-letter view. since/until filter created_at ([since, until), ISO 8601 with an "
    "offset); error_type is the last attempt's error type."
)
_RETRY = (
    "Requeue a FAILED execution now with a new attempt budget (its retry policy's "
    "max_attempts more); its attempts are kept and numbering continues. The optional body "
    '{"endpoint_version": "current"} delivers it with the endpoint as it is now instead of '
    "its job's snapshot (shown as endpoint_version). 409 EXECUTION_NOT_RETRYABLE unless "
    "FAILED (or once its endpoint is deleted)."
)
_ENDPOINT_VERSION = {
    "enum": ["snapshot", "current"],
    "default": "snapshot",
    "description": "Deliver the requeued executions with their job's endpoint snapshot (the "
    "default) or with the endpoint's current definition (a fixed URL, headers, policy).",
}
_REDRIVE = (
    "Requeue the endpoint's FAILED executions created in [since, until), optionally of "
    "one last error type, in batches. Idempotent: a repeat requeues none of them again. "
    "At most 5,000 per request: while `more` is true, call again."
)


def _optional_body(built: Operation) -> Operation:
    path, method, op = built
    op["requestBody"]["required"] = False
    return path, method, op


def _with_conflict(built: Operation, description: str) -> Operation:
    path, method, op = built
    op["responses"]["409"] = response_ref("Conflict", description)
    return path, method, op


DEAD_LETTERS: dict[str, Any] = {
    "paths": paths(
        operation(
            "GET",
            "/executions",
            "listExecutions",
            "ListedExecutionPage",
            _LIST,
            paged=True,
            query=(
                query_param("status", EXECUTION_STATUS),
                query_param("endpoint", {"type": "string"}),
                query_param("since", INSTANT),
                query_param("until", INSTANT),
                query_param("error_type", ERROR_TYPE),
            ),
        ),
        _with_conflict(
            _optional_body(
                operation(
                    "POST",
                    "/executions/{execution_id}/retry",
                    "retryExecution",
                    "Execution",
                    _RETRY,
                    body="RetryRequest",
                )
            ),
            "EXECUTION_NOT_RETRYABLE: the execution is not FAILED, or its endpoint is deleted.",
        ),
        operation(
            "POST",
            "/endpoints/{name}/redrive",
            "redriveEndpoint",
            "RedriveResult",
            _REDRIVE,
            body="RedriveRequest",
        ),
    ),
    "schemas": {
        "ListedExecution": {
            "allOf": [
                schema_ref("Execution"),
                {
                    "type": "object",
                    "properties": {
                        "error_type": {"type": ["string", "null"]},
                        "error": {
                            "type": ["string", "null"],
                            "description": "The last attempt's error message, as recorded "
                            "(secret values redacted).",
                        },
                        "completed_at": TIMESTAMP,
                    },
                },
            ]
        },
        "ListedExecutionPage": page_of("ListedExecution"),
        "RedriveRequest": {
            "type": "object",
            "required": ["since", "until"],
            "additionalProperties": False,
            "properties": {
                "since": INSTANT,
                "until": INSTANT,
                "error_type": ERROR_TYPE,
                "endpoint_version": _ENDPOINT_VERSION,
            },
        },
        "RetryRequest": {
            "type": "object",
            "additionalProperties": False,
            "description": "Optional body.",
            "properties": {"endpoint_version": _ENDPOINT_VERSION},
        },
        "RedriveResult": {
            "type": "object",
            "required": ["requeued", "more"],
            "properties": {
                "requeued": {"type": "integer", "minimum": 0},
                "more": {"type": "boolean"},
            },
        },
    },
}
