"""Routes for dead letters: the listing ``GET /executions`` (with
``status=FAILED``, the dead-letter view), ``POST /executions/{id}/retry`` and
``POST /endpoints/{name}/redrive``. Their rules: :mod:`chalicelib.services.dead_letters`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chalicelib.api.executions import EXECUTION_FIELDS, render_execution_detail
from chalicelib.api.http import Resource, shown
from chalicelib.api.pagination import page_response, parse_page
from chalicelib.domain.dead_letters import (
    parse_execution_filter,
    parse_redrive_request,
    parse_retry_request,
)
from chalicelib.services.dead_letters import ListedExecution

resource = Resource(__name__)


def render_listed(execution: ListedExecution) -> dict[str, Any]:
    """An execution with its last attempt's error type and message (as recorded, redacted)."""
    return {
        **shown(execution, EXECUTION_FIELDS),
        "error_type": execution.error_type,
        "error": execution.error_message,
    }


@resource.route("/executions", methods=["GET"])
def list_executions() -> dict[str, Any]:
    """Executions across jobs, newest first; filters status, endpoint, since, until,
    error_type. ``status=FAILED`` is the dead-letter view."""
    params: Mapping[str, str] = resource.request.query_params or {}
    page = parse_page(params)
    filters = parse_execution_filter(params)
    service = resource.services.dead_letter_service()
    return page_response(
        lambda part: service.list(filters, part),
        page,
        render=render_listed,
        id_field="execution_id",
    )


@resource.route("/executions/{execution_id}/retry", methods=["POST"])
def retry_execution(execution_id: str) -> dict[str, Any]:
    """A FAILED execution QUEUED again with a new attempt budget (numbering continues); an
    optional body ``{"endpoint_version": "current"}`` delivers it with the endpoint as it is
    now instead of its job's snapshot."""
    raw = resource.request.raw_body
    body = resource.json_body() if raw and raw.strip() else None
    version = parse_retry_request(body)
    detail = resource.services.dead_letter_service().retry(execution_id, version)
    return render_execution_detail(detail)


@resource.route("/endpoints/{name}/redrive", methods=["POST"])
def redrive_endpoint(name: str) -> dict[str, Any]:
    """Requeue the endpoint's FAILED executions created in [since, until), optionally of one
    error type; ``{"requeued": n, "more": bool}`` (call again while ``more``)."""
    request = parse_redrive_request(resource.json_body())
    result = resource.services.dead_letter_service().redrive(name, request)
    return {"requeued": result.requeued, "more": result.more}
