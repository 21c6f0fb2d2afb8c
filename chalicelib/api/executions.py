"""Routes for executions: ``/executions/{id}`` (+ cancel, attempts, logs) and
``/jobs/{id}/executions``; the execution representations every job route reuses.

``GET /executions/{id}`` honours ``Prefer: wait=N`` (RFC 7240): it answers as soon as the
execution is terminal or after N seconds (at most 25), and says so with
``Preference-Applied: wait=N``. Between polls no database connection is held.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chalicelib.api.http import ApiResponse, Resource, shown
from chalicelib.api.pagination import page_response, parse_page
from chalicelib.services.executions import parse_execution_status
from chalicelib.services.longpoll import parse_prefer_wait
from chalicelib.services.views import (
    Attempt,
    Execution,
    ExecutionDetail,
    ExecutionSummary,
    LogLine,
)

resource = Resource(__name__)


# -- representations ----------------------------------------------------------------------


#: The fields each representation shows, in order; each is the view's attribute of that name.
SUMMARY_FIELDS = ("execution_id", "status", "created_at")
EXECUTION_FIELDS = (
    "execution_id",
    "job_id",
    "endpoint",
    "endpoint_type",
    "status",
    "input",
    "output",
    "attempt_count",
    "max_attempts",
    "run_at",
    "started_at",
    "completed_at",
    "duration_ms",
    "created_at",
)
ATTEMPT_FIELDS = (
    "attempt_id",
    "execution_id",
    "attempt_number",
    "status",
    "started_at",
    "completed_at",
    "duration_ms",
    "output",
    "error",
    "created_at",
)
LOG_FIELDS = ("log_id", "execution_id", "attempt_number", "level", "message", "logged_at")


def render_execution_summary(execution: ExecutionSummary | None) -> dict[str, Any] | None:
    """The ``execution`` object inside a job: id, status, created_at."""
    return None if execution is None else shown(execution, SUMMARY_FIELDS)


def render_execution(execution: Execution) -> dict[str, Any]:
    """Everything a user can learn about one execution (never its config snapshot)."""
    return shown(execution, EXECUTION_FIELDS)


def render_execution_detail(detail: ExecutionDetail) -> dict[str, Any]:
    """One execution with ``queue_position`` and ``endpoint_version`` (single-execution
    responses only)."""
    return {
        **render_execution(detail.execution),
        "queue_position": detail.queue_position,
        "endpoint_version": detail.endpoint_version,
    }


def render_attempt(attempt: Attempt) -> dict[str, Any]:
    return shown(attempt, ATTEMPT_FIELDS)


def render_log(line: LogLine) -> dict[str, Any]:
    return shown(line, LOG_FIELDS)


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
    detail = resource.services.execution_service().get(execution_id, wait=wait)
    return waited(render_execution_detail(detail), wait)


@resource.route("/executions/{execution_id}/cancel", methods=["POST"])
def cancel_execution(execution_id: str) -> dict[str, Any]:
    """Cancel if PENDING, QUEUED or RETRYING; already CANCELLED answers 200 as it is.

    409 EXECUTION_NOT_CANCELLABLE when RUNNING, SUCCESS or FAILED.
    """
    return render_execution_detail(resource.services.execution_service().cancel(execution_id))


@resource.route("/executions/{execution_id}/attempts", methods=["GET"])
def list_attempts(execution_id: str) -> dict[str, Any]:
    """Attempts, by attempt_number ascending."""
    page = parse_page(resource.request.query_params)
    service = resource.services.execution_service()
    return page_response(
        lambda part: service.attempts(execution_id, part),
        page,
        render=render_attempt,
        id_field="attempt_id",
    )


@resource.route("/executions/{execution_id}/logs", methods=["GET"])
def list_logs(execution_id: str) -> dict[str, Any]:
    """Log lines, oldest first."""
    page = parse_page(resource.request.query_params)
    service = resource.services.execution_service()
    return page_response(
        lambda part: service.logs(execution_id, part),
        page,
        render=render_log,
        ts_field="logged_at",
        id_field="log_id",
    )


@resource.route("/jobs/{job_id}/executions", methods=["GET"])
def list_job_executions(job_id: str) -> dict[str, Any]:
    """A job's executions, newest first, optionally filtered by ``status``."""
    params: Mapping[str, str] = resource.request.query_params or {}
    page = parse_page(params)
    status = parse_execution_status(params.get("status"))
    service = resource.services.job_status_service()
    return page_response(
        lambda part: service.executions(job_id, status, part),
        page,
        render=render_execution,
        id_field="execution_id",
    )
