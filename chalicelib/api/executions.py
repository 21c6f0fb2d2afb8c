"""Routes for executions: ``/executions/{id}`` (+ cancel, attempts, logs) and
``/jobs/{id}/executions``; the execution representations every job route reuses.

``GET /executions/{id}`` honours ``Prefer: wait=N`` (RFC 7240): it answers as soon as the
execution is terminal or after N seconds (at most 25), and says so with
``Preference-Applied: wait=N``. Between polls no database connection is held.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chalicelib import services
from chalicelib.api.http import ApiResponse, Resource
from chalicelib.api.pagination import page_response, parse_page
from chalicelib.domain.timefmt import iso
from chalicelib.services.executions import parse_execution_status
from chalicelib.services.longpoll import MAX_WAIT_SECONDS, parse_prefer_wait
from chalicelib.services.views import (
    Attempt,
    Execution,
    ExecutionDetail,
    ExecutionSummary,
    LogLine,
)

resource = Resource(__name__)


# -- representations ----------------------------------------------------------------------


def render_execution_summary(execution: ExecutionSummary | None) -> dict[str, Any] | None:
    """The ``execution`` object inside a job: id, status, created_at."""
    if execution is None:
        return None
    return {
        "execution_id": execution.execution_id,
        "status": execution.status,
        "created_at": iso(execution.created_at),
    }


def render_execution(execution: Execution) -> dict[str, Any]:
    """Everything a user can learn about one execution (never its config snapshot)."""
    return {
        "execution_id": execution.execution_id,
        "job_id": execution.job_id,
        "endpoint": execution.endpoint,
        "endpoint_type": execution.endpoint_type,
        "status": execution.status,
        "input": execution.input,
        "output": execution.output,
        "attempt_count": execution.attempt_count,
        "max_attempts": execution.max_attempts,
        "run_at": iso(execution.run_at),
        "started_at": iso(execution.started_at),
        "completed_at": iso(execution.completed_at),
        "duration_ms": execution.duration_ms,
        "created_at": iso(execution.created_at),
    }


def render_execution_detail(detail: ExecutionDetail) -> dict[str, Any]:
    """One execution with ``queue_position`` (single-execution responses only)."""
    return {**render_execution(detail.execution), "queue_position": detail.queue_position}


def render_attempt(attempt: Attempt) -> dict[str, Any]:
    return {
        "attempt_id": attempt.attempt_id,
        "execution_id": attempt.execution_id,
        "attempt_number": attempt.attempt_number,
        "status": attempt.status,
        "started_at": iso(attempt.started_at),
        "completed_at": iso(attempt.completed_at),
        "duration_ms": attempt.duration_ms,
        "output": attempt.output,
        "error": attempt.error,
        "created_at": iso(attempt.created_at),
    }


def render_log(line: LogLine) -> dict[str, Any]:
    return {
        "log_id": line.log_id,
        "execution_id": line.execution_id,
        "attempt_number": line.attempt_number,
        "level": line.level,
        "message": line.message,
        "logged_at": iso(line.logged_at),
    }


def requested_wait() -> int | None:
    """The request's ``Prefer: wait=N`` (capped; malformed values ignored per RFC 7240)."""
    return parse_prefer_wait(resource.request.headers.get("prefer"))


def waited(body: Any, wait: int | None) -> Any:
    """Add ``Preference-Applied`` when the wait preference was honoured."""
    if wait is None:
        return body
    return ApiResponse(body, headers={"Preference-Applied": f"wait={wait}"})


# -- routes -------------------------------------------------------------------------------


@resource.route("/executions/{execution_id}", methods=["GET"])
def get_execution(execution_id: str) -> Any:
    """One execution; ``queue_position`` is its 1-based place in the claim order while QUEUED."""
    wait = requested_wait()
    detail = services.execution_service().get(execution_id, wait=wait)
    return waited(render_execution_detail(detail), wait)


@resource.route("/executions/{execution_id}/cancel", methods=["POST"])
def cancel_execution(execution_id: str) -> dict[str, Any]:
    """Cancel if PENDING, QUEUED or RETRYING; already CANCELLED answers 200 as it is.

    409 EXECUTION_NOT_CANCELLABLE when RUNNING, SUCCESS or FAILED.
    """
    return render_execution_detail(services.execution_service().cancel(execution_id))


@resource.route("/executions/{execution_id}/attempts", methods=["GET"])
def list_attempts(execution_id: str) -> dict[str, Any]:
    """Attempts, by attempt_number ascending."""
    page = parse_page(resource.request.query_params)
    attempts = services.execution_service().attempts(execution_id, page)
    return page_response(attempts, page, render=render_attempt, id_field="attempt_id")


@resource.route("/executions/{execution_id}/logs", methods=["GET"])
def list_logs(execution_id: str) -> dict[str, Any]:
    """Log lines, oldest first."""
    page = parse_page(resource.request.query_params)
    lines = services.execution_service().logs(execution_id, page)
    return page_response(lines, page, render=render_log, ts_field="logged_at", id_field="log_id")


@resource.route("/jobs/{job_id}/executions", methods=["GET"])
def list_job_executions(job_id: str) -> dict[str, Any]:
    """A job's executions, newest first, optionally filtered by ``status``."""
    params: Mapping[str, str] = resource.request.query_params or {}
    page = parse_page(params)
    status = parse_execution_status(params.get("status"))
    executions = services.job_status_service().executions(job_id, status, page)
    return page_response(executions, page, render=render_execution, id_field="execution_id")


# -- OpenAPI ------------------------------------------------------------------------------

TIMESTAMP = {"type": ["string", "null"], "format": "date-time"}
EXECUTION_STATUS = {
    "type": "string",
    "enum": ["PENDING", "QUEUED", "RUNNING", "RETRYING", "SUCCESS", "FAILED", "CANCELLED"],
}


def json_content(ref: str) -> dict[str, Any]:
    """``content`` of a JSON body with a component schema."""
    return {"application/json": {"schema": {"$ref": f"#/components/schemas/{ref}"}}}


def page_of(ref: str) -> dict[str, Any]:
    """The ``{"items", "cursor"}`` list shape around a component schema."""
    return {
        "type": "object",
        "required": ["items", "cursor"],
        "properties": {
            "items": {"type": "array", "items": {"$ref": f"#/components/schemas/{ref}"}},
            "cursor": {"type": ["string", "null"]},
        },
    }


_ERROREXECUTION_STATUS = {
    "BadRequest": "400",
    "Unauthorized": "401",
    "NotFound": "404",
    "Conflict": "409",
    "PayloadTooLarge": "413",
    "Unprocessable": "422",
}


def operation(
    op_id: str, summary: str, ok: str, *, errors: tuple[str, ...], **extra: Any
) -> dict[str, Any]:
    """An OpenAPI operation answering 200 with schema ``ok`` and the listed shared errors."""
    responses: dict[str, Any] = {"200": {"description": summary, "content": json_content(ok)}}
    for name in ("Unauthorized", *errors):
        responses[_ERROREXECUTION_STATUS[name]] = {"$ref": f"#/components/responses/{name}"}
    return {"operationId": op_id, "summary": summary, "responses": responses, **extra}


_ID = {"name": "execution_id", "in": "path", "required": True, "schema": {"type": "string"}}
_JOB_ID = {"name": "job_id", "in": "path", "required": True, "schema": {"type": "string"}}
_PAGE = [{"$ref": "#/components/parameters/Limit"}, {"$ref": "#/components/parameters/Cursor"}]
PREFER_WAIT = {
    "name": "Prefer",
    "in": "header",
    "required": False,
    "description": "RFC 7240 `wait=N`: answer once terminal or after N s (max "
    f"{MAX_WAIT_SECONDS}); echoed in `Preference-Applied`. Malformed values are ignored.",
    "schema": {"type": "string", "example": "wait=10"},
}

OPENAPI: dict[str, Any] = {
    "paths": {
        "/executions/{execution_id}": {
            "get": operation(
                "getExecution",
                "Get an execution (long-poll with Prefer: wait=N).",
                "Execution",
                errors=("NotFound",),
                parameters=[_ID, PREFER_WAIT],
            )
        },
        "/executions/{execution_id}/cancel": {
            "post": operation(
                "cancelExecution",
                "Cancel a PENDING, QUEUED or RETRYING execution (already CANCELLED: 200, "
                "unchanged; RUNNING, SUCCESS, FAILED: 409 EXECUTION_NOT_CANCELLABLE).",
                "Execution",
                errors=("NotFound", "Conflict"),
                parameters=[_ID],
            )
        },
        "/executions/{execution_id}/attempts": {
            "get": operation(
                "listAttempts",
                "List attempts by attempt_number.",
                "AttemptPage",
                errors=("BadRequest", "NotFound"),
                parameters=[_ID, *_PAGE],
            )
        },
        "/executions/{execution_id}/logs": {
            "get": operation(
                "listExecutionLogs",
                "List log lines, oldest first.",
                "ExecutionLogPage",
                errors=("BadRequest", "NotFound"),
                parameters=[_ID, *_PAGE],
            )
        },
        "/jobs/{job_id}/executions": {
            "get": operation(
                "listJobExecutions",
                "List a job's executions, newest first.",
                "ExecutionPage",
                errors=("BadRequest", "NotFound"),
                parameters=[
                    _JOB_ID,
                    *_PAGE,
                    {
                        "name": "status",
                        "in": "query",
                        "required": False,
                        "schema": EXECUTION_STATUS,
                    },
                ],
            )
        },
    },
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
                    "QUEUED; null otherwise. Only on single-execution responses.",
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
