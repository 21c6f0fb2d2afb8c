"""OpenAPI for bulk actions: ``POST /executions/bulk``, ``POST /executions/bulk/count``,
``GET /operations/{id}`` and ``POST /operations/{id}/abort``."""

from __future__ import annotations

from typing import Any

from chalicelib.api.openapi.common import (
    INSTANT,
    TIMESTAMP,
    Operation,
    operation,
    paths,
    response_ref,
    schema_ref,
)
from chalicelib.api.openapi.dead_letters import ERROR_TYPE
from chalicelib.api.openapi.executions import EXECUTION_STATUS

_BULK = (
    "Retry, cancel or delete the executions a filter matches, in pages in the background. "
    "The set is fixed now: executions created afterwards are not touched. retry acts on "
    "FAILED executions, cancel on PENDING, QUEUED and RETRYING ones, delete on SUCCESS, "
    "FAILED and CANCELLED ones (with their attempts and logs); any other is refused and "
    "counted. 202 with the operation (its first page done). An empty filter is refused "
    'unless "all": true is given beside it.'
)
_COUNT = (
    "How many executions a bulk action's filter matches now, before acting: the same "
    'filter and "all" as POST /executions/bulk, without the action. Counted up to limit '
    "(1000): more is true when more than that match (matched is then the limit), so the "
    "answer costs a bounded read whatever the history. Changes nothing; a POST, so it "
    "needs a write key, as the action it precedes."
)
_GET = "A bulk operation and its progress (matched = done + refused)."
_ABORT = (
    "Stop a RUNNING bulk operation: ABORTED, no page after this. Already ABORTED: 200, "
    "unchanged; DONE or FAILED: 409 OPERATION_NOT_RUNNING."
)


def _accepted(built: Operation) -> Operation:
    """The operation answering 202 (with a Location) instead of 200."""
    path, method, op = built
    ok = op["responses"].pop("200")
    ok["headers"] = {"Location": {"schema": {"type": "string"}}}
    op["responses"] = {"202": ok, **op["responses"]}
    return path, method, op


def _with_conflict(built: Operation, description: str) -> Operation:
    path, method, op = built
    op["responses"]["409"] = response_ref("Conflict", description)
    return path, method, op


_FILTER = {
    "type": "object",
    "additionalProperties": False,
    "description": 'Every field optional; an empty filter needs "all": true beside it.',
    "properties": {
        "endpoint": {"type": "string", "minLength": 1},
        "status": {
            "oneOf": [EXECUTION_STATUS, {"type": "array", "items": EXECUTION_STATUS, "minItems": 1}]
        },
        "error_type": ERROR_TYPE,
        "created_after": {**INSTANT, "description": "created_at >= created_after"},
        "created_before": {**INSTANT, "description": "created_at < created_before"},
    },
}

OPERATIONS: dict[str, Any] = {
    "paths": paths(
        _accepted(
            operation(
                "POST",
                "/executions/bulk",
                "createBulkAction",
                "Operation",
                _BULK,
                body="BulkAction",
            )
        ),
        operation(
            "POST",
            "/executions/bulk/count",
            "countBulkMatches",
            "BulkCount",
            _COUNT,
            body="BulkSelection",
        ),
        operation("GET", "/operations/{operation_id}", "getOperation", "Operation", _GET),
        _with_conflict(
            operation(
                "POST", "/operations/{operation_id}/abort", "abortOperation", "Operation", _ABORT
            ),
            "OPERATION_NOT_RUNNING: the operation ended DONE or FAILED.",
        ),
    ),
    "schemas": {
        "BulkAction": {
            "type": "object",
            "required": ["action"],
            "additionalProperties": False,
            "properties": {
                "action": {"type": "string", "enum": ["retry", "cancel", "delete"]},
                "filter": schema_ref("BulkFilter"),
                "all": {
                    "type": "boolean",
                    "description": "true: every execution (only with an empty filter).",
                },
            },
        },
        "BulkFilter": _FILTER,
        "BulkSelection": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "filter": schema_ref("BulkFilter"),
                "all": {
                    "type": "boolean",
                    "description": "true: every execution (only with an empty filter).",
                },
            },
        },
        "BulkCount": {
            "type": "object",
            "required": ["matched", "more", "limit"],
            "properties": {
                "matched": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Executions the filter matches now, at most limit.",
                },
                "more": {
                    "type": "boolean",
                    "description": "true: more than limit match (show it as more than limit).",
                },
                "limit": {"type": "integer", "minimum": 1},
            },
        },
        "Operation": {
            "type": "object",
            "required": ["operation_id", "action", "state", "matched", "done", "refused"],
            "properties": {
                "operation_id": {"type": "string"},
                "action": {"type": "string", "enum": ["retry", "cancel", "delete"]},
                "state": {"type": "string", "enum": ["RUNNING", "DONE", "ABORTED", "FAILED"]},
                "matched": {"type": "integer", "minimum": 0},
                "done": {"type": "integer", "minimum": 0},
                "refused": {"type": "integer", "minimum": 0},
                "filter": {
                    "type": "object",
                    "description": "The filter as normalized (status always a list).",
                },
                "error": {"type": ["string", "null"]},
                "created_at": TIMESTAMP,
                "ended_at": TIMESTAMP,
            },
        },
    },
}
