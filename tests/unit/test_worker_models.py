"""The worker builds a claimed execution per claimed row and a finished one per delivery
without the frozen dataclass's ``__init__``: what it builds must equal what ``__init__``
builds from the same values, whichever of the row's optional columns are set."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime

import pytest

from chalicelib.domain.statuses import AttemptStatus, ExecutionStatus, LogLevel
from chalicelib.worker.models import ClaimedExecution, FinishedExecution

SNAPSHOT = {"name": "ep", "type": "HTTP", "spec": {"url": "http://127.0.0.1:9/"}}
ROW = {
    "execution_id": "exec_1",
    "job_id": "job_1",
    "endpoint": "ep",
    "endpoint_type": "HTTP",
    "input": None,
    "attempt_count": 2,
    "max_attempts": 4,
    "config_snapshot": {"region": "eu"},
    "endpoint_snapshot": json.dumps(SNAPSHOT),
    "endpoint_cap": 3,
    "follows": False,
    "job_headers": None,
    "traceparent": None,
    "tracestate": None,
    "delivery_overrides": None,
    "late_ms": None,
    "retry_elapsed_ms": None,
}
OPTIONAL = {
    "job_headers": {"X-Tenant": "t1", "Authorization": "Bearer s3cret-value"},
    "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    "tracestate": "vendor=1",
    "delivery_overrides": {"retry_policy": {"max_attempts": 9}, "expire_after_ms": 60000},
    "late_ms": 12,
    "retry_elapsed_ms": 3400,
}


def _by_init(claimed: ClaimedExecution) -> ClaimedExecution:
    """The same values through the dataclass's own __init__."""
    values = {f.name: getattr(claimed, f.name) for f in dataclasses.fields(claimed)}
    return ClaimedExecution(**values)


@pytest.mark.parametrize("column", [None, *OPTIONAL])
def test_a_claimed_row_builds_what_init_builds(column: str | None) -> None:
    row = dict(ROW) if column is None else {**ROW, column: OPTIONAL[column]}
    claimed = ClaimedExecution.from_row(row)

    assert claimed.fault is None
    assert claimed == _by_init(claimed)
    assert claimed.input == {} and claimed.attempt == 2 and claimed.endpoint_cap == 3
    assert claimed.follows is False and claimed.spec == SNAPSHOT["spec"]
    if column is None:
        assert (claimed.headers, claimed.credentials, claimed.overrides) == (None, (), None)
        assert (claimed.traceparent, claimed.late_ms, claimed.retry_elapsed_ms) == (None,) * 3


def test_every_optional_column_sets_its_field() -> None:
    claimed = ClaimedExecution.from_row({**ROW, **OPTIONAL})

    assert claimed.headers == OPTIONAL["job_headers"]
    assert "Bearer s3cret-value" in claimed.credentials
    assert claimed.traceparent == OPTIONAL["traceparent"]
    assert claimed.tracestate == "vendor=1"
    assert claimed.overrides == OPTIONAL["delivery_overrides"]
    assert claimed.retry_policy.max_attempts == 4  # the row's count, over the override's
    assert claimed.policy is not None and claimed.late_ms == 12
    assert claimed.retry_elapsed_ms == 3400
    assert claimed == _by_init(claimed)


def test_headers_that_are_not_an_object_make_the_row_a_fault() -> None:
    claimed = ClaimedExecution.from_row({**ROW, "job_headers": ["X-Tenant"]})

    assert claimed.fault is not None and "not an object" in claimed.fault


def test_a_claimed_execution_stays_frozen() -> None:
    claimed = ClaimedExecution.from_row(dict(ROW))

    with pytest.raises(dataclasses.FrozenInstanceError):
        claimed.attempt = 3  # type: ignore[misc]


def test_a_finished_execution_built_from_fields_equals_init() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    fields = {
        "execution_id": "exec_1",
        "endpoint": "ep",
        "attempt_number": 1,
        "attempt_status": AttemptStatus.SUCCESS,
        "next_status": ExecutionStatus.SUCCESS,
        "started_at": at,
        "completed_at": at,
        "duration_ms": 5,
        "output": {"status_code": 200},
        "follows": False,
        "log_message": "Attempt 1 succeeded.",
    }
    finished = FinishedExecution.of(dict(fields))

    assert finished == FinishedExecution(**fields)
    assert finished.log_level is LogLevel.INFO and finished.hold_ms is None
    assert finished.to_json() == FinishedExecution(**fields).to_json()
    with pytest.raises(dataclasses.FrozenInstanceError):
        finished.duration_ms = 6  # type: ignore[misc]
