"""OpenAPI for executions: ``/executions/{id}`` (+ cancel, attempts, logs) and
``/jobs/{id}/executions``."""

from __future__ import annotations

from typing import Any

from chalicelib.api.openapi.common import TIMESTAMP, operation, page_of, paths, query_param

EXECUTION_STATUS = {
    "type": "string",
    "enum": ["PENDING", "QUEUED", "RUNNING", "RETRYING", "SUCCESS", "FAILED", "CANCELLED"],
}

_CANCEL = (
    "Cancel a PENDING, QUEUED or RETRYING execution (already CANCELLED: 200, unchanged; "
    "RUNNING, SUCCESS, FAILED: 409 EXECUTION_NOT_CANCELLABLE)."
)
_ONE = "/executions/{execution_id}"
_STATUS_FILTER = query_param("status", EXECUTION_STATUS)

EXECUTIONS: dict[str, Any] = {
    "paths": paths(
        operation(
            "GET",
            _ONE,
            "getExecution",
            "Execution",
            "Get an execution (long-poll with Prefer: wait=N).",
            wait=True,
        ),
        operation(
            "POST", f"{_ONE}/cancel", "cancelExecution", "Execution", _CANCEL, errors=("Conflict",)
        ),
        operation(
            "GET",
            f"{_ONE}/attempts",
            "listAttempts",
            "AttemptPage",
            "List attempts by attempt_number.",
            paged=True,
        ),
        operation(
            "GET",
            f"{_ONE}/logs",
            "listExecutionLogs",
            "ExecutionLogPage",
            "List log lines, oldest first.",
            paged=True,
        ),
        operation(
            "GET",
            "/jobs/{job_id}/executions",
            "listJobExecutions",
            "ExecutionPage",
            "List a job's executions, newest first.",
            paged=True,
            query=(_STATUS_FILTER,),
        ),
    ),
    "schemas": {
        "ExecutionSummary": {
            "type": "object",
            "required": ["execution_id", "status", "created_at"],
            "properties": {
                "execution_id": {"type": "string", "pattern": "^exec_"},
                "status": EXECUTION_STATUS,
                "created_at": TIMESTAMP,
            },
        },
        "Execution": {
            "type": "object",
            "properties": {
                "execution_id": {"type": "string", "pattern": "^exec_"},
                "job_id": {"type": "string", "pattern": "^job_"},
                "endpoint": {"type": "string"},
                "endpoint_type": {"type": "string", "enum": ["HTTP", "KAFKA", "REDIS_STREAM"]},
                "status": EXECUTION_STATUS,
                "input": {"type": ["object", "null"]},
                "output": {"type": ["object", "null"]},
                "attempt_count": {"type": "integer"},
                "max_attempts": {"type": "integer"},
                "run_at": TIMESTAMP,
                "started_at": TIMESTAMP,
                "completed_at": TIMESTAMP,
                "duration_ms": {"type": ["integer", "null"]},
                "created_at": TIMESTAMP,
                "queue_position": {
                    "type": ["integer", "null"],
                    "description": "1-based place among due claimable executions while "
                    "QUEUED; null otherwise (also while it waits behind its ordering key's "
                    "head: it is not claimable yet). Only on single-execution responses. At most "
                    "1,000 executions ahead are counted: 1001 means at least 1,001.",
                },
                "endpoint_version": {
                    "enum": ["snapshot", "current"],
                    "description": "The definition of its endpoint it is delivered with: its "
                    'job\'s "snapshot", or "current" once a retry or redrive asked for the '
                    "endpoint as it is. Only on single-execution responses.",
                },
            },
        },
        "Attempt": {
            "type": "object",
            "properties": {
                "attempt_id": {"type": "string", "pattern": "^att_"},
                "execution_id": {"type": "string"},
                "attempt_number": {"type": "integer"},
                "status": {"type": "string", "enum": ["SUCCESS", "FAILED"]},
                "started_at": TIMESTAMP,
                "completed_at": TIMESTAMP,
                "duration_ms": {"type": ["integer", "null"]},
                "output": {"type": ["object", "null"]},
                "error": {"type": ["object", "null"]},
                "created_at": TIMESTAMP,
            },
        },
        "ExecutionLog": {
            "type": "object",
            "properties": {
                "log_id": {"type": "string", "pattern": "^log_"},
                "execution_id": {"type": "string"},
                "attempt_number": {"type": "integer"},
                "level": {"type": "string", "enum": ["DEBUG", "INFO", "WARN", "ERROR"]},
                "message": {"type": "string"},
                "logged_at": TIMESTAMP,
            },
        },
        "ExecutionPage": page_of("Execution"),
        "AttemptPage": page_of("Attempt"),
        "ExecutionLogPage": page_of("ExecutionLog"),
    },
}
