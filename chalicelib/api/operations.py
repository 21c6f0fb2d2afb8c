"""Routes for bulk actions: ``POST /executions/bulk`` (a retry, cancel or delete over the
executions a filter matches, worked through in the background), ``POST
/executions/bulk/count`` (how many a filter matches, before acting) and its operation,
``GET /operations/{id}`` and ``POST /operations/{id}/abort``. Their rules:
:mod:`chalicelib.domain.operations` (the request) and :mod:`chalicelib.services.operations`
(the pages)."""

from __future__ import annotations

from typing import Any

from chalicelib.api.http import ApiResponse, Resource, shown
from chalicelib.domain.operations import parse_bulk_count_request, parse_bulk_request
from chalicelib.services.operations import Operation

resource = Resource(__name__)


#: What an operation shows, in order: ``matched`` counts every execution its pages read,
#: ``done`` those acted on, ``refused`` those the action does not apply to.
OPERATION_FIELDS = (
    "operation_id",
    "action",
    "state",
    "matched",
    "done",
    "refused",
    "filter",
    "error",
    "created_at",
    "ended_at",
)


def render_operation(operation: Operation) -> dict[str, Any]:
    return shown(operation, OPERATION_FIELDS)


@resource.route("/executions/bulk", methods=["POST"])
def create_bulk_action() -> ApiResponse:
    """202 with the new operation (its first page already done; a small set is DONE)."""
    request = parse_bulk_request(resource.json_body())
    operation = resource.services.operation_service().create(request)
    return ApiResponse(
        render_operation(operation),
        status=202,
        headers={"Location": f"/operations/{operation.operation_id}"},
    )


@resource.route("/executions/bulk/count", methods=["POST"])
def count_bulk_matches() -> dict[str, Any]:
    """How many executions a bulk action's filter matches now: ``{"matched", "more",
    "limit"}``, counted up to ``limit`` (``more``: more than that match). Changes nothing."""
    bulk_filter = parse_bulk_count_request(resource.json_body())
    counted = resource.services.operation_service().count(bulk_filter)
    return {"matched": counted.matched, "more": counted.more, "limit": counted.limit}


@resource.route("/operations/{operation_id}", methods=["GET"])
def get_operation(operation_id: str) -> dict[str, Any]:
    """A bulk operation and its progress."""
    return render_operation(resource.services.operation_service().get(operation_id))


@resource.route("/operations/{operation_id}/abort", methods=["POST"])
def abort_operation(operation_id: str) -> dict[str, Any]:
    """Stop a RUNNING operation (ABORTED; already ABORTED answers as it is). 409
    OPERATION_NOT_RUNNING when it ended DONE or FAILED."""
    return render_operation(resource.services.operation_service().abort(operation_id))
