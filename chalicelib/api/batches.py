"""Routes for batches: ``POST /jobs/batch``, ``GET /batches/{id}``, its jobs, its cancel."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chalicelib.api.http import Resource, shown
from chalicelib.api.jobs import render_job, request_trace
from chalicelib.api.pagination import page_response, parse_page
from chalicelib.services.batches import Batch
from chalicelib.services.executions import parse_execution_status
from chalicelib.services.jobs.create import Outcome

resource = Resource(__name__)


def render_item(outcome: Outcome) -> dict[str, Any]:
    """One item of a batch response: 201 created, 200 idempotency hit, or 4xx error."""
    if outcome.error is not None:
        error = outcome.error
        return {"status": error.status, "error": {"code": error.code, "message": error.message}}
    assert outcome.view is not None
    return {"status": 201 if outcome.created else 200, "job": render_job(outcome.view)}


def render_batch(batch: Batch) -> dict[str, Any]:
    state = batch.progress
    body = shown(batch, ("batch_id", "total", "on_complete", "created_at"))
    body.update(
        status=state.status.value,
        counts=state.counts,
        completed_at=shown(state, ("completed_at",))["completed_at"],
    )
    return body


@resource.route("/jobs/batch", methods=["POST"])
def create_batch() -> dict[str, Any]:
    """Up to 1,000 job requests in one transaction; per-item status, in order."""
    with resource.services.traced("POST /jobs/batch", request_trace(resource.request)) as trace:
        result = resource.services.batch_service().create(resource.json_body(), trace=trace)
    return {"batch_id": result.batch_id, "items": [render_item(o) for o in result.items]}


@resource.route("/batches/{batch_id}", methods=["GET"])
def get_batch(batch_id: str) -> dict[str, Any]:
    """Total, counts by execution status, RUNNING or COMPLETED (with completed_at)."""
    return render_batch(resource.services.batch_service().get(batch_id))


@resource.route("/batches/{batch_id}/jobs", methods=["GET"])
def list_batch_jobs(batch_id: str) -> dict[str, Any]:
    """The batch's jobs, newest first; ``status`` filters by execution status."""
    params: Mapping[str, str] = resource.request.query_params or {}
    page = parse_page(params)
    status = parse_execution_status(params.get("status"))
    service = resource.services.batch_service()
    return page_response(
        lambda part: service.jobs_page(batch_id, status, part),
        page,
        render=render_job,
        id_field="job_id",
    )


@resource.route("/batches/{batch_id}/cancel", methods=["POST"])
def cancel_batch(batch_id: str) -> dict[str, Any]:
    """Cancel every cancellable child in one transaction; says how many."""
    result = resource.services.batch_service().cancel(batch_id)
    return {
        "cancelled": result.cancelled,
        "retired": result.retired,
        "batch": render_batch(result.batch),
    }
