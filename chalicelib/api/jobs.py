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
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from chalice.app import Request

from chalicelib.api.executions import (
    render_execution_detail,
    render_execution_summary,
    requested_wait,
    waited,
)
from chalicelib.api.http import ApiResponse, Resource, check_fields, expect_type, shown
from chalicelib.api.pagination import page_response, parse_page
from chalicelib.domain.cron import render_local
from chalicelib.domain.job_delivery import shown_overrides
from chalicelib.domain.jobs import parse_job_filters
from chalicelib.domain.statuses import JobStatus, TriggerType
from chalicelib.domain.timefmt import iso
from chalicelib.domain.trace_context import TRACEPARENT, TRACESTATE, TraceContext, trace_context
from chalicelib.errors import ValidationFailed
from chalicelib.services.jobs.rows import JobView
from chalicelib.services.jobs.status import JobHealthReport
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
    """The job's zone; UTC for a zone this process cannot load (a row the scheduler set
    aside for it: the job must still be shown, with its schedule_error)."""
    assert job.cron_timezone is not None, "a CRON job always has a timezone"
    try:
        return ZoneInfo(job.cron_timezone)
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


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
    body.update(shown_if_set(job, CALLBACK_FIELDS))
    if job.ordering_key is not None:
        body["ordering_key"] = job.ordering_key
    body["concurrency_key"] = job.concurrency_key  # null when unset
    body.update(shown_if_set(job, SET_ASIDE_FIELDS))
    body.update(shown_overrides(job.delivery_overrides))
    # Only an ACTIVE cron job can be paused; a retired one is not (whatever it was).
    body["paused_at"] = iso(job.paused_at) if job.status == JobStatus.ACTIVE else None
    body["created_at"] = iso(job.created_at)
    return body


#: Shown on a job only when set: its batch, its callbacks, the execution it reports on,
#: why the scheduler set it aside.
CALLBACK_FIELDS = ("batch_id", "on_success", "on_failure", "parent_execution_id")
SET_ASIDE_FIELDS = ("schedule_error",)


def shown_if_set(job: Job, names: tuple[str, ...]) -> dict[str, Any]:
    return {name: value for name in names if (value := getattr(job, name)) is not None}


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


STATS_FIELDS = ("total", "succeeded", "failed", "avg_duration_ms", "p99_duration_ms")


def render_status(report: JobHealthReport) -> dict[str, Any]:
    job = report.job
    return {
        "job_id": job.job_id,
        "endpoint": job.endpoint,
        "endpoint_type": job.endpoint_type,
        "trigger": job.trigger_type,
        "status": job.status,
        "health": report.health.value,
        **shown_if_set(job, SET_ASIDE_FIELDS),
        "version": job.version,
        "last_execution": _last_execution(report.last_execution),
        "active_executions": {
            "pending": report.pending,
            "running": report.running,
            "total": report.pending + report.running,
        },
        "cron": _cron_block(job),
        "stats": {"last_24h": shown(report.stats, STATS_FIELDS)},
    }


def request_trace(request: Request) -> TraceContext | None:
    """The W3C trace context of a request's ``traceparent`` and ``tracestate`` headers;
    None when it has none or a malformed one (ignored, as the recommendation says)."""
    headers = request.headers
    parent = headers.get(TRACEPARENT)
    return None if parent is None else trace_context(parent, headers.get(TRACESTATE))


# -- routes -------------------------------------------------------------------------------


@resource.route("/jobs", methods=["POST"], status=201)
def create_job() -> Any:
    """201 with the new job, or 200 with the existing one on an idempotency-key hit; a
    ``traceparent`` header (W3C) is kept with the job. With ``topic`` instead of
    ``endpoint``: ``{"topic", "jobs"}``, one job per endpoint of the topic."""
    body = resource.json_body()
    if "topic" in body:
        return _fan_out(body)
    if "endpoint" not in body:
        raise ValidationFailed("Missing required field: endpoint (or topic).")
    with resource.services.traced("POST /jobs", request_trace(resource.request)) as trace:
        result = resource.services.job_service().create(body, trace=trace)
    return ApiResponse(render_job(result.view), status=201 if result.created else 200)


def _fan_out(body: dict[str, Any]) -> ApiResponse:
    """POST /jobs with ``topic``: 201 with every job created, 200 with those the key found."""
    with resource.services.traced("POST /jobs", request_trace(resource.request)) as trace:
        result = resource.services.job_service().fan_out(body, trace=trace)
    jobs = [render_job(view) for view in result.views]
    return ApiResponse({"topic": result.topic, "jobs": jobs}, status=201 if result.created else 200)


@resource.route("/jobs", methods=["GET"])
def list_jobs() -> dict[str, Any]:
    """Jobs newest first; filters ``endpoint``, ``trigger``, ``status``."""
    params: Mapping[str, str] = resource.request.query_params or {}
    page = parse_page(params)
    filters = parse_job_filters(params)
    service = resource.services.job_service()
    return page_response(
        lambda part: service.list_page(filters, part), page, render=render_job, id_field="job_id"
    )


@resource.route("/jobs/{job_id}", methods=["GET"])
def get_job(job_id: str) -> Any:
    """A job with its (latest) execution; ``Prefer: wait=N`` long-polls for a final one."""
    wait = requested_wait()
    view = resource.services.job_service().get(job_id, wait=wait)
    return waited(render_job(view, with_latest=True), wait)


@resource.route("/jobs/{job_id}", methods=["PUT"])
def update_job(job_id: str) -> dict[str, Any]:
    """New version of a CRON job (old one RETIRED); 409 JOB_NOT_UPDATABLE otherwise."""
    return render_job(resource.services.job_service().update(job_id, resource.json_body()))


@resource.route("/jobs/{job_id}/cancel", methods=["POST"])
def cancel_job(job_id: str) -> dict[str, Any]:
    """CRON: retire. One-shot: cancel its execution if PENDING/QUEUED/RETRYING.

    Idempotent: an already retired or cancelled job answers 200 with its current state;
    409 EXECUTION_NOT_CANCELLABLE for a one-shot whose execution is RUNNING/SUCCESS/FAILED.
    """
    return render_job(resource.services.job_service().cancel(job_id), with_latest=True)


@resource.route("/jobs/{job_id}/trigger", methods=["POST"], status=201)
def trigger_job(job_id: str) -> dict[str, Any]:
    """Run an ACTIVE cron job now: one extra execution, due now (its own idempotency key,
    listed with the job's executions); the schedule does not move. 409 JOB_NOT_TRIGGERABLE
    for a one-shot or RETIRED job."""
    execution_id = resource.services.job_service().trigger(job_id)
    return render_execution_detail(resource.services.execution_service().get(execution_id))


@resource.route("/jobs/{job_id}/pause", methods=["POST"])
def pause_job(job_id: str) -> dict[str, Any]:
    """Pause an ACTIVE cron job: no ticks until resumed (idempotent); 409 JOB_NOT_PAUSABLE
    otherwise."""
    return render_job(resource.services.job_service().pause(job_id), with_latest=True)


@resource.route("/jobs/{job_id}/resume", methods=["POST"])
def resume_job(job_id: str) -> dict[str, Any]:
    """Resume a paused cron job; ``{"catch_up": true}`` fires the ticks missed meanwhile
    (default: skipped)."""
    return render_job(
        resource.services.job_service().resume(job_id, catch_up=_catch_up()),
        with_latest=True,
    )


def _catch_up() -> bool:
    """The resume body's ``catch_up`` (the body is optional; false when absent)."""
    raw = resource.request.raw_body
    if not raw or not raw.strip():
        return False
    body = resource.json_body()
    check_fields(body, optional=("catch_up",))
    return bool(expect_type(body, "catch_up", bool))


@resource.route("/jobs/{job_id}/status", methods=["GET"])
def job_status(job_id: str) -> dict[str, Any]:
    """Health, last execution, in-flight counts, cron block and 24-hour stats."""
    return render_status(resource.services.job_status_service().status(job_id))


@resource.route("/jobs/{job_id}/versions", methods=["GET"])
def job_versions(job_id: str) -> dict[str, Any]:
    """Every version of the job's chain (from any version's id), oldest first."""
    page = parse_page(resource.request.query_params)
    service = resource.services.job_service()
    return page_response(
        lambda part: service.versions(job_id, part),
        page,
        render=lambda job: render_job(JobView(job)),
        id_field="job_id",
    )
