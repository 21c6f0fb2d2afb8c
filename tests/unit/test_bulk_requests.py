"""The body of POST /executions/bulk: what it means, and every refusal with its status and
message (chalicelib/domain/operations.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from chalicelib.domain.operations import BulkAction, BulkFilter, parse_bulk_request
from chalicelib.errors import ValidationFailed

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
EVERY_STATUS = ("PENDING", "QUEUED", "RUNNING", "RETRYING", "SUCCESS", "FAILED", "CANCELLED")


def test_a_full_filter_is_parsed_and_normalized() -> None:
    request = parse_bulk_request(
        {
            "action": "retry",
            "filter": {
                "endpoint": "orders",
                "status": ["FAILED", "CANCELLED", "FAILED"],
                "error_type": "HTTP_ERROR",
                "created_after": "2026-03-01T12:00:00Z",
                "created_before": "2026-03-01T14:00:00+01:00",
            },
        }
    )
    assert request.action is BulkAction.RETRY
    assert request.filter == BulkFilter(
        endpoint="orders",
        statuses=("FAILED", "CANCELLED"),  # deduplicated, in the table's order
        error_type="HTTP_ERROR",
        created_after=T0,
        created_before=datetime(2026, 3, 1, 13, 0, tzinfo=UTC),
    )


def test_one_status_is_a_list_of_one_and_no_status_is_every_status() -> None:
    one = parse_bulk_request({"action": "cancel", "filter": {"status": "QUEUED"}})
    assert one.filter.statuses == ("QUEUED",)
    none = parse_bulk_request({"action": "cancel", "filter": {"endpoint": "e"}})
    assert none.filter.statuses == EVERY_STATUS


def test_all_true_beside_an_empty_filter_means_every_execution() -> None:
    for body in (
        {"action": "delete", "filter": {}, "all": True},
        {"action": "delete", "all": True},
    ):
        assert parse_bulk_request(body).filter == BulkFilter()


def test_null_filter_fields_are_as_if_absent() -> None:
    request = parse_bulk_request({"action": "retry", "filter": {"endpoint": "e", "status": None}})
    assert request.filter == BulkFilter(endpoint="e")


def test_the_stored_filter_reads_back_the_same() -> None:
    parsed = parse_bulk_request(
        {"action": "retry", "filter": {"status": "FAILED", "created_after": "2026-03-01T12:00:00Z"}}
    ).filter
    assert BulkFilter.from_json(parsed.to_json()) == parsed


def test_the_set_is_cut_at_the_operations_creation() -> None:
    created = T0
    later = BulkFilter(created_before=datetime(2027, 1, 1, tzinfo=UTC)).execution_filter(created)
    assert later.until == created  # created_before after the creation: the creation bounds
    earlier = BulkFilter(created_before=datetime(2026, 1, 1, tzinfo=UTC), created_after=None)
    assert earlier.execution_filter(created).until == datetime(2026, 1, 1, tzinfo=UTC)
    assert BulkFilter().execution_filter(created).until == created


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "The request body must be a JSON object."),
        ("retry", "The request body must be a JSON object."),
        (
            {"action": "retry", "filter": {}},
            'An empty filter acts on every execution: give filter fields, or "all": true '
            "beside an empty filter to mean every execution.",
        ),
        (
            {"action": "retry"},
            'An empty filter acts on every execution: give filter fields, or "all": true '
            "beside an empty filter to mean every execution.",
        ),
        (
            {"action": "retry", "filter": {"endpoint": None}, "all": False},
            'An empty filter acts on every execution: give filter fields, or "all": true '
            "beside an empty filter to mean every execution.",
        ),
        (
            {"action": "retry", "filter": {"endpoint": "e"}, "all": True},
            '"all": true means every execution: it takes an empty filter.',
        ),
        ({"action": "retry", "all": "yes"}, "Field 'all' must be true or false."),
        (
            {"filter": {"endpoint": "e"}},
            "Field 'action' must be one of retry, cancel, delete, got None.",
        ),
        (
            {"action": "RETRY", "filter": {"endpoint": "e"}},
            "Field 'action' must be one of retry, cancel, delete, got 'RETRY'.",
        ),
        (
            {"action": "retry", "filter": {"endpoint": "e"}, "dry_run": True, "limit": 1},
            "Unknown field(s) for a bulk action: dry_run, limit.",
        ),
        (
            {"action": "retry", "filter": {"endpoint": "e", "since": "x"}},
            "Unknown field(s) for a bulk filter: since.",
        ),
        ({"action": "retry", "filter": ["e"]}, "Field 'filter' must be a JSON object."),
        (
            {"action": "retry", "filter": {"endpoint": ""}},
            "filter.endpoint must be a non-empty endpoint name.",
        ),
        (
            {"action": "retry", "filter": {"endpoint": 7}},
            "filter.endpoint must be a non-empty endpoint name.",
        ),
        (
            {"action": "retry", "filter": {"status": "DEAD"}},
            "filter.status must be one of PENDING, QUEUED, RUNNING, RETRYING, SUCCESS, FAILED, "
            "CANCELLED, got 'DEAD'.",
        ),
        (
            {"action": "retry", "filter": {"status": ["FAILED", "failed"]}},
            "filter.status must be one of PENDING, QUEUED, RUNNING, RETRYING, SUCCESS, FAILED, "
            "CANCELLED, got 'failed'.",
        ),
        (
            {"action": "retry", "filter": {"status": []}},
            "filter.status must be a status or a non-empty list of statuses.",
        ),
        (
            {"action": "retry", "filter": {"status": 3}},
            "filter.status must be a status or a non-empty list of statuses.",
        ),
        (
            {"action": "retry", "filter": {"error_type": "http_error"}},
            "filter.error_type must be an error type such as HTTP_ERROR or TIMEOUT "
            "(upper-case letters, digits, '_'; at most 64), got 'http_error'.",
        ),
        (
            {"action": "retry", "filter": {"created_after": "yesterday"}},
            "Field 'filter.created_after' is not an ISO 8601 timestamp: 'yesterday'.",
        ),
        (
            {"action": "retry", "filter": {"created_before": "2026-03-01T12:00:00"}},
            "Field 'filter.created_before' must include a UTC offset (e.g. 'Z' or '+05:30'): "
            "'2026-03-01T12:00:00'.",
        ),
        (
            {
                "action": "retry",
                "filter": {
                    "created_after": "2026-03-01T12:00:00Z",
                    "created_before": "2026-03-01T12:00:00Z",
                },
            },
            "filter.created_after must be earlier than filter.created_before.",
        ),
    ],
)
def test_every_refusal_is_a_400_naming_what_is_wrong(body: Any, message: str) -> None:
    with pytest.raises(ValidationFailed) as refused:
        parse_bulk_request(body)
    assert (refused.value.status, refused.value.code) == (400, "INVALID_REQUEST")
    assert str(refused.value) == message
