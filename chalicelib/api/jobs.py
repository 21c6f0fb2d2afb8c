"""Routes for /jobs: create (IMMEDIATE, DELAYED, CRON), list, get, update, cancel, status,
versions.

Timestamps are UTC ``...Z`` except a cron job's ``next_run_at`` / ``last_tick_at``, which
are rendered in the job's timezone with its offset (``2026-03-16T09:00:00+05:30``).
``GET /jobs/{id}`` honours ``Prefer: wait=N`` like ``GET /executions/{id}``, waiting for
the job's latest execution to be terminal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from zoneinfo import ZoneInfo

from chalicelib import services
from chalicelib.api.executions import (
    PREFER_WAIT,
    TIMESTAMP,
    operation,
    page_of,
    render_execution_summary,
    requested_wait,
    waited,
)
from chalicelib.api.http import ApiResponse, Resource
from chalicelib.api.pagination import page_response, parse_page
from chalicelib.domain.cron import render_local
from chalicelib.domain.jobs import parse_job_filters
from chalicelib.domain.statuses import JobStatus, TriggerType
from chalicelib.domain.timefmt import iso
from chalicelib.services.job_status import JobHealthReport, WindowStats
from chalicelib.services.jobs import JobView
from chalicelib.services.views import ExecutionSummary, Job

resource = Resource(__name__)


# -- representations ----------------------------------------------------------------------


def _next_run_at(job: Job, zone: ZoneInfo) -> str | None:
    """The next tick in local time; null once the job is retired or past its ends_at."""
    moment = job.cron_next_run_at
    if job.status != JobStatus.ACTIVE or moment is None:
        return None
    if job.cron_ends_at is not None and moment >= job.cron_ends_at:
        return None
    return render_local(moment, zone)


def _zone(job: Job) -> ZoneInfo:
    assert job.cron_timezone is not None, "a CRON job always has a timezone"
    return ZoneInfo(job.cron_timezone)


def _cron_fields(job: Job) -> dict[str, Any]:
    return {
        "cron": job.cron_expression,
        "timezone": job.cron_timezone,
        "starts_at": iso(job.cron_starts_at),
        "ends_at": iso(job.cron_ends_at),
        "next_run_at": _next_run_at(job, _zone(job)),
    }


def render_job(view: JobView, *, with_latest: bool = False) -> dict[str, Any]:
    """A job as the spec shows it; one-shot jobs embed their ``execution``.

    ``with_latest`` adds a cron job's ``latest_execution`` (``GET /jobs/{id}``).
    """
    job = view.job
    body: dict[str, Any] = {
        "job_id": job.job_id,
        "endpoint": job.endpoint,
        "endpoint_type": job.endpoint_type,
        "trigger": job.trigger_type,
        "status": job.status,
        "version": job.version,
    }
    if job.previous_version_id is not None:
        body["previous_version_id"] = job.previous_version_id
    if job.trigger_type == TriggerType.CRON:
        if job.idempotency_key is not None:
            body["idempotency_key"] = job.idempotency_key
        body.update(_cron_fields(job))
        body["input"] = job.input
        if with_latest:
            body["latest_execution"] = render_execution_summary(view.execution)
    else:
        body["idempotency_key"] = job.idempotency_key
        if job.trigger_type == TriggerType.DELAYED:
            body["run_at"] = iso(job.run_at)
        body["input"] = job.input
        body["execution"] = render_execution_summary(view.execution)
    if job.status == JobStatus.RETIRED:
        body["retired_at"] = iso(job.retired_at)
        body["replaced_by_id"] = job.replaced_by_id
    body["created_at"] = iso(job.created_at)
    return body


def _last_execution(execution: ExecutionSummary | None) -> dict[str, Any] | None:
    if execution is None:
        return None
    return {
        "execution_id": execution.execution_id,
        "status": execution.status,
        "started_at": iso(execution.started_at),
        "completed_at": iso(execution.completed_at),
        "attempt_number": execution.attempt_count,
    }


def _cron_block(job: Job) -> dict[str, Any] | None:
    if job.trigger_type != TriggerType.CRON:
        return None
    zone = _zone(job)
    return {
        "expression": job.cron_expression,
        "timezone": job.cron_timezone,
        "next_run_at": _next_run_at(job, zone),
        "last_tick_at": render_local(job.cron_last_tick_at, zone),
    }


def _render_stats(stats: WindowStats) -> dict[str, Any]:
    return {
        "total": stats.total,
        "succeeded": stats.succeeded,
        "failed": stats.failed,
        "avg_duration_ms": stats.avg_duration_ms,
        "p99_duration_ms": stats.p99_duration_ms,
    }


def render_status(report: JobHealthReport) -> dict[str, Any]:
    job = report.job
    return {
        "job_id": job.job_id,
        "endpoint": job.endpoint,
        "endpoint_type": job.endpoint_type,
        "trigger": job.trigger_type,
        "status": job.status,
        "health": report.health.value,
        "version": job.version,
        "last_execution": _last_execution(report.last_execution),
        "active_executions": {
            "pending": report.pending,
            "running": report.running,
            "total": report.pending + report.running,
        },
        "cron": _cron_block(job),
        "stats": {"last_24h": _render_stats(report.stats)},
    }


# -- routes -------------------------------------------------------------------------------


@resource.route("/jobs", methods=["POST"], status=201)
def create_job() -> Any:
    """201 with the new job, or 200 with the existing one on an idempotency-key hit."""
    result = services.job_service().create(resource.json_body())
    return ApiResponse(render_job(result.view), status=201 if result.created else 200)


@resource.route("/jobs", methods=["GET"])
def list_jobs() -> dict[str, Any]:
    """Jobs newest first; filters ``endpoint``, ``trigger``, ``status``."""
    params: Mapping[str, str] = resource.request.query_params or {}
    page = parse_page(params)
    views = services.job_service().list_page(parse_job_filters(params), page)
    return page_response(views, page, render=render_job, id_field="job_id")


@resource.route("/jobs/{job_id}", methods=["GET"])
def get_job(job_id: str) -> Any:
    """A job with its (latest) execution; ``Prefer: wait=N`` long-polls for a final one."""
    wait = requested_wait()
    view = services.job_service().get(job_id, wait=wait)
    return waited(render_job(view, with_latest=True), wait)


@resource.route("/jobs/{job_id}", methods=["PUT"])
def update_job(job_id: str) -> dict[str, Any]:
    """New version of a CRON job (old one RETIRED); 409 JOB_NOT_UPDATABLE otherwise."""
    return render_job(services.job_service().update(job_id, resource.json_body()))


@resource.route("/jobs/{job_id}/cancel", methods=["POST"])
def cancel_job(job_id: str) -> dict[str, Any]:
    """CRON: retire. One-shot: cancel its execution if PENDING/QUEUED/RETRYING.

    Idempotent: an already retired or cancelled job answers 200 with its current state;
    409 EXECUTION_NOT_CANCELLABLE for a one-shot whose execution is RUNNING/SUCCESS/FAILED.
    """
    return render_job(services.job_service().cancel(job_id), with_latest=True)


@resource.route("/jobs/{job_id}/status", methods=["GET"])
def job_status(job_id: str) -> dict[str, Any]:
    """Health, last execution, in-flight counts, cron block and 24-hour stats."""
    return render_status(services.job_status_service().status(job_id))


@resource.route("/jobs/{job_id}/versions", methods=["GET"])
def job_versions(job_id: str) -> dict[str, Any]:
    """Every version of the job's chain (from any version's id), oldest first."""
    page = parse_page(resource.request.query_params)
    versions = services.job_service().versions(job_id, page)
    return page_response(
        versions, page, render=lambda job: render_job(JobView(job)), id_field="job_id"
    )


# -- OpenAPI ------------------------------------------------------------------------------

_ID = {"name": "job_id", "in": "path", "required": True, "schema": {"type": "string"}}
_PAGE = [{"$ref": "#/components/parameters/Limit"}, {"$ref": "#/components/parameters/Cursor"}]
_TRIGGER = {"type": "string", "enum": ["IMMEDIATE", "DELAYED", "CRON"]}
_JOB_STATUS = {"type": "string", "enum": ["ACTIVE", "RETIRED"]}
_SUMMARY = {"oneOf": [{"$ref": "#/components/schemas/ExecutionSummary"}, {"type": "null"}]}
_COUNT = {"type": "integer"}
_MS = {"type": ["integer", "null"]}


def _body(ref: str) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": {"$ref": ref}}}}


def _query(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema}


_CREATE = operation(
    "createJob",
    "Existing job (idempotency_key already used for this endpoint).",
    "Job",
    errors=("BadRequest", "NotFound", "PayloadTooLarge", "Unprocessable"),
    requestBody=_body("#/components/schemas/JobCreate"),
    description="IMMEDIATE: execution QUEUED now. DELAYED: execution PENDING until run_at "
    "(a past run_at fires on the promoter's next pass). CRON: no execution until the first "
    "tick. 404 ENDPOINT_NOT_FOUND; 422 INVALID_CRON or INPUT_VALIDATION_FAILED.",
)
_CREATE["responses"]["201"] = {
    "description": "Job created.",
    "content": _CREATE["responses"]["200"]["content"],
}

OPENAPI: dict[str, Any] = {
    "paths": {
        "/jobs": {
            "post": _CREATE,
            "get": operation(
                "listJobs",
                "List jobs, newest first.",
                "JobPage",
                errors=("BadRequest",),
                parameters=[
                    *_PAGE,
                    _query("endpoint", {"type": "string"}),
                    _query("trigger", _TRIGGER),
                    _query("status", _JOB_STATUS),
                ],
            ),
        },
        "/jobs/{job_id}": {
            "get": operation(
                "getJob",
                "Get a job with its (latest) execution; long-poll with Prefer: wait=N.",
                "Job",
                errors=("NotFound",),
                parameters=[_ID, PREFER_WAIT],
            ),
            "put": operation(
                "updateJob",
                "New version of a CRON job; the old version becomes RETIRED.",
                "Job",
                errors=("BadRequest", "NotFound", "Conflict", "PayloadTooLarge", "Unprocessable"),
                parameters=[_ID],
                requestBody=_body("#/components/schemas/JobUpdate"),
            ),
        },
        "/jobs/{job_id}/cancel": {
            "post": operation(
                "cancelJob",
                "CRON: retire. One-shot: cancel its PENDING/QUEUED/RETRYING execution. "
                "Idempotent: already retired or cancelled answers 200 with the current state; "
                "409 EXECUTION_NOT_CANCELLABLE when the execution is RUNNING, SUCCESS or FAILED.",
                "Job",
                errors=("NotFound", "Conflict"),
                parameters=[_ID],
            )
        },
        "/jobs/{job_id}/status": {
            "get": operation(
                "getJobStatus",
                "Health and 24-hour statistics.",
                "JobStatus",
                errors=("NotFound",),
                parameters=[_ID],
            )
        },
        "/jobs/{job_id}/versions": {
            "get": operation(
                "listJobVersions",
                "Version chain, oldest first.",
                "JobPage",
                errors=("BadRequest", "NotFound"),
                parameters=[_ID, *_PAGE],
            )
        },
    },
    "schemas": {
        "JobCreate": {
            "type": "object",
            "required": ["endpoint", "trigger"],
            "additionalProperties": False,
            "properties": {
                "endpoint": {"type": "string"},
                "trigger": _TRIGGER,
                "idempotency_key": {
                    "type": "string",
                    "maxLength": 255,
                    "description": "Required for IMMEDIATE and DELAYED; optional for CRON.",
                },
                "input": {"type": "object"},
                "run_at": {"type": "string", "format": "date-time"},
                "cron": {"type": "string", "description": "5 fields; required for CRON."},
                "timezone": {"type": "string", "description": "IANA; required for CRON."},
                "starts_at": {"type": "string", "format": "date-time"},
                "ends_at": {"type": ["string", "null"], "format": "date-time"},
            },
        },
        "JobUpdate": {
            "type": "object",
            "additionalProperties": False,
            "minProperties": 1,
            "description": "Fields left out are carried over from the current version.",
            "properties": {
                "cron": {"type": "string"},
                "timezone": {"type": "string"},
                "input": {"type": "object"},
                "starts_at": {"type": "string", "format": "date-time"},
                "ends_at": {"type": ["string", "null"], "format": "date-time"},
            },
        },
        "Job": {
            "type": "object",
            "required": ["job_id", "endpoint", "endpoint_type", "trigger", "status", "version"],
            "properties": {
                "job_id": {"type": "string", "pattern": "^job_"},
                "endpoint": {"type": "string"},
                "endpoint_type": {"type": "string", "enum": ["HTTP", "KAFKA", "REDIS_STREAM"]},
                "trigger": _TRIGGER,
                "status": _JOB_STATUS,
                "version": {"type": "integer", "minimum": 1},
                "previous_version_id": {"type": "string"},
                "idempotency_key": {"type": ["string", "null"]},
                "run_at": TIMESTAMP,
                "cron": {"type": "string"},
                "timezone": {"type": "string"},
                "starts_at": TIMESTAMP,
                "ends_at": TIMESTAMP,
                "next_run_at": {
                    "type": ["string", "null"],
                    "description": "In the job's timezone with its offset.",
                },
                "input": {"type": ["object", "null"]},
                "execution": _SUMMARY,
                "latest_execution": _SUMMARY,
                "retired_at": TIMESTAMP,
                "replaced_by_id": {"type": ["string", "null"]},
                "created_at": TIMESTAMP,
            },
        },
        "JobPage": page_of("Job"),
        "JobStatus": {
            "type": "object",
            "properties": {
                "job_id": {"type": "string"},
                "endpoint": {"type": "string"},
                "endpoint_type": {"type": "string"},
                "trigger": _TRIGGER,
                "status": _JOB_STATUS,
                "health": {"type": "string", "enum": ["HEALTHY", "DEGRADED", "FAILING", "IDLE"]},
                "version": {"type": "integer"},
                "last_execution": {"type": ["object", "null"]},
                "active_executions": {
                    "type": "object",
                    "description": "pending = PENDING + QUEUED + RETRYING; running = RUNNING.",
                    "properties": {"pending": _COUNT, "running": _COUNT, "total": _COUNT},
                },
                "cron": {"type": ["object", "null"]},
                "stats": {
                    "type": "object",
                    "properties": {
                        "last_24h": {
                            "type": "object",
                            "properties": {
                                "total": _COUNT,
                                "succeeded": _COUNT,
                                "failed": _COUNT,
                                "avg_duration_ms": _MS,
                                "p99_duration_ms": _MS,
                            },
                        }
                    },
                },
            },
        },
    },
}
