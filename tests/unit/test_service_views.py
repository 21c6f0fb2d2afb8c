"""The frozen views services return: built from a row by ``from_row``, typed, immutable.

Pure: rows are the dicts a named query returns (column name -> value); no database.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest

from chalicelib.domain.statuses import (
    AttemptStatus,
    EndpointType,
    ExecutionStatus,
    JobStatus,
    LogLevel,
    TriggerType,
)
from chalicelib.services.configs import ConfigView
from chalicelib.services.endpoints import EndpointView
from chalicelib.services.jobs.rows import JobView
from chalicelib.services.jobs.status import WindowStats
from chalicelib.services.payload_specs import PayloadSpecView
from chalicelib.services.secrets import SecretView
from chalicelib.services.views import (
    Attempt,
    Execution,
    ExecutionDetail,
    ExecutionSummary,
    Job,
    LogLine,
)

T0 = datetime(2026, 3, 15, 10, 0, tzinfo=UTC)
T1 = datetime(2026, 3, 15, 10, 5, tzinfo=UTC)

JOB_ROW: dict[str, Any] = {
    "job_id": "job_1",
    "endpoint": "hook",
    "endpoint_type": "HTTP",
    "trigger_type": "CRON",
    "status": "ACTIVE",
    "version": 2,
    "previous_version_id": "job_0",
    "replaced_by_id": None,
    "idempotency_key": None,
    "input": {"user_id": "u_1"},
    "run_at": None,
    "cron_expression": "0 9 * * *",
    "cron_timezone": "Asia/Kolkata",
    "cron_starts_at": T0,
    "cron_ends_at": None,
    "cron_next_run_at": T1,
    "cron_last_tick_at": None,
    "created_at": T0,
    "retired_at": None,
    "batch_id": None,
    "on_success": None,
    "on_failure": None,
    "parent_execution_id": None,
    "paused_at": None,
    "schedule_error": None,
    "delivery_overrides": None,
    "ordering_key": None,
    "concurrency_key": None,
}
SUMMARY_ROW: dict[str, Any] = {
    "execution_id": "exec_1",
    "job_id": "job_1",
    "status": "QUEUED",
    "attempt_count": 0,
    "run_at": T0,
    "started_at": None,
    "completed_at": None,
    "created_at": T0,
}
EXECUTION_ROW: dict[str, Any] = {
    **SUMMARY_ROW,
    "status": "SUCCESS",
    "attempt_count": 1,
    "endpoint": "hook",
    "endpoint_type": "KAFKA",
    "input": {"a": 1},
    "output": {"status_code": 200},
    "max_attempts": 3,
    "started_at": T0,
    "completed_at": T1,
    "duration_ms": 300000,
}
ATTEMPT_ROW: dict[str, Any] = {
    "attempt_id": "att_1",
    "execution_id": "exec_1",
    "attempt_number": 1,
    "status": "FAILED",
    "started_at": T0,
    "completed_at": T1,
    "duration_ms": 12,
    "output": None,
    "error": {"type": "TIMEOUT"},
    "created_at": T1,
}
LOG_ROW: dict[str, Any] = {
    "log_id": "log_1",
    "execution_id": "exec_1",
    "attempt_number": 1,
    "level": "WARN",
    "message": "retrying",
    "logged_at": T1,
}
SETUP_STAMPS: dict[str, Any] = {"name": "n", "created_at": T0, "updated_at": T1}
ENDPOINT_ROW: dict[str, Any] = {
    **SETUP_STAMPS,
    "name": "hook",
    "endpoint_type": "HTTP",
    "payload_spec_ref": "spec",
    "config_ref": None,
    "spec": {"url": "https://example.test/x", "method": "POST"},
    "retry_policy": {"max_attempts": 3},
    "on_success": None,
    "on_failure": None,
    "flow_control": None,
    "ordering": None,
    "paused_at": None,
    "paused_reason": None,
    "auto_pause_after_ms": 432000000,
    "held_until": None,
}


def test_job_from_row_reads_every_column_and_types_its_enums() -> None:
    job = Job.from_row(JOB_ROW)
    assert job.trigger_type is TriggerType.CRON
    assert job.status is JobStatus.ACTIVE and job.endpoint_type is EndpointType.HTTP
    assert (job.job_id, job.version, job.previous_version_id) == ("job_1", 2, "job_0")
    assert (job.cron_next_run_at, job.input) == (T1, {"user_id": "u_1"})
    assert {f.name for f in dataclasses.fields(Job)} == set(JOB_ROW)


def test_execution_views_from_their_query_shapes() -> None:
    summary = ExecutionSummary.from_row(SUMMARY_ROW)
    assert summary.status is ExecutionStatus.QUEUED and summary.completed_at is None
    execution = Execution.from_row(EXECUTION_ROW)
    assert execution.status is ExecutionStatus.SUCCESS
    assert execution.endpoint_type is EndpointType.KAFKA
    assert (execution.max_attempts, execution.duration_ms) == (3, 300000)
    assert isinstance(execution, ExecutionSummary)  # everything a summary shows, and more
    assert ExecutionSummary.maybe(None) is None
    detail = ExecutionDetail(Execution.from_row({**EXECUTION_ROW, "status": "QUEUED"}), 4)
    assert detail.status is ExecutionStatus.QUEUED and detail.queue_position == 4


def test_attempt_and_log_line_from_row() -> None:
    attempt = Attempt.from_row(ATTEMPT_ROW)
    assert attempt.status is AttemptStatus.FAILED and attempt.error == {"type": "TIMEOUT"}
    line = LogLine.from_row(LOG_ROW)
    assert line.level is LogLevel.WARN and line.logged_at == T1


def test_a_missing_column_fails_at_the_boundary_not_in_a_renderer() -> None:
    row = {k: v for k, v in EXECUTION_ROW.items() if k != "max_attempts"}
    with pytest.raises(KeyError, match="max_attempts"):
        Execution.from_row(row)
    with pytest.raises(ValueError, match="NOT_A_STATUS"):
        Job.from_row({**JOB_ROW, "status": "NOT_A_STATUS"})


def test_job_view_carries_the_keyset_of_its_job() -> None:
    view = JobView.from_rows(JOB_ROW, SUMMARY_ROW)
    assert (view.job_id, view.created_at) == ("job_1", T0)
    assert view.execution is not None and view.execution.execution_id == "exec_1"
    assert JobView.from_rows(JOB_ROW).execution is None


def test_setup_views_from_row() -> None:
    config = ConfigView.from_row({**SETUP_STAMPS, "value": {"k": "v"}})
    assert (config.name, config.values, config.updated_at) == ("n", {"k": "v"}, T1)
    spec = PayloadSpecView.from_row({**SETUP_STAMPS, "value": {"type": "object"}})
    assert spec.schema == {"type": "object"}
    endpoint = EndpointView.from_row(ENDPOINT_ROW)
    assert endpoint.type is EndpointType.HTTP and endpoint.payload_spec == "spec"
    assert endpoint.retry_policy["max_attempts"] == 3
    assert endpoint.spec["timeout_ms"] == 30000  # defaults applied, as a job would snapshot


def test_a_secret_view_has_no_field_for_the_value() -> None:
    secret = SecretView.from_row({**SETUP_STAMPS, "value": b"ciphertext"})
    assert {f.name for f in dataclasses.fields(secret)} == {"name", "created_at", "updated_at"}
    assert "ciphertext" not in repr(secret)


def test_window_stats_count_an_empty_window_as_zero() -> None:
    stats = WindowStats.from_row({})
    assert (stats.total, stats.succeeded, stats.failed) == (0, 0, 0)
    assert stats.avg_duration_ms is None
    rounded = WindowStats.from_row({"total": 3, "avg_duration_ms": 12, "p99_duration_ms": 40})
    assert (rounded.total, rounded.avg_duration_ms, rounded.p99_duration_ms) == (3, 12, 40)


VIEWS = [
    Job.from_row(JOB_ROW),
    ExecutionSummary.from_row(SUMMARY_ROW),
    Execution.from_row(EXECUTION_ROW),
    ExecutionDetail(Execution.from_row(EXECUTION_ROW), None),
    Attempt.from_row(ATTEMPT_ROW),
    LogLine.from_row(LOG_ROW),
    JobView.from_rows(JOB_ROW),
    WindowStats.from_row({}),
    ConfigView.from_row({**SETUP_STAMPS, "value": {}}),
    PayloadSpecView.from_row({**SETUP_STAMPS, "value": {}}),
    SecretView.from_row(SETUP_STAMPS),
    EndpointView.from_row(ENDPOINT_ROW),
]


@pytest.mark.parametrize("view", VIEWS, ids=lambda v: type(v).__name__)
def test_every_view_is_frozen(view: Any) -> None:
    name = dataclasses.fields(view)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(view, name, None)
