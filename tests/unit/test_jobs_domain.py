"""Job request validation, input validation, snapshots and the long-poll loop."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from chalicelib.domain.endpoints import endpoint_snapshot, retry_policy_with_defaults
from chalicelib.domain.jobs import (
    CronSchedule,
    parse_cron_update,
    parse_job_filters,
    parse_job_request,
)
from chalicelib.domain.payload_specs import validate_input
from chalicelib.domain.statuses import TriggerType
from chalicelib.errors import InputValidationFailed, InvalidCron, ValidationFailed
from chalicelib.services.longpoll import Poller, parse_prefer_wait
from tests.support.clock import FakeClock

NOW = datetime(2026, 3, 15, 10, 0, tzinfo=UTC)


def body(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"endpoint": "ep", "trigger": "IMMEDIATE", "idempotency_key": "k"}
    base.update(fields)
    return {k: v for k, v in base.items() if v is not None}


def bad(payload: dict[str, Any], fragment: str, error: type = ValidationFailed) -> None:
    with pytest.raises(error) as info:
        parse_job_request(payload, now=NOW)
    assert fragment in info.value.message


# -- POST /jobs bodies --------------------------------------------------------------------


def test_immediate_defaults_input_to_empty_object() -> None:
    request = parse_job_request(body(), now=NOW)
    assert request.trigger is TriggerType.IMMEDIATE
    assert request.input == {}
    assert request.run_at is None and request.schedule is None


def test_delayed_parses_run_at_with_offset() -> None:
    request = parse_job_request(
        body(trigger="DELAYED", run_at="2026-03-15T23:30:00+05:30"), now=NOW
    )
    assert request.run_at == datetime(2026, 3, 15, 18, 0, tzinfo=UTC)


def test_cron_defaults_starts_at_to_now_and_normalizes() -> None:
    request = parse_job_request(
        body(trigger="CRON", idempotency_key=None, cron="0  9 * * MON", timezone="Asia/Kolkata"),
        now=NOW,
    )
    assert request.schedule == CronSchedule(
        expression="0 9 * * MON", timezone="Asia/Kolkata", starts_at=NOW, ends_at=None
    )
    assert request.idempotency_key is None


@pytest.mark.parametrize(
    "payload,fragment",
    [
        (body(trigger=None), "trigger"),
        (body(trigger="WEEKLY"), "IMMEDIATE, DELAYED, CRON"),
        (body(endpoint=None), "endpoint"),
        (body(endpoint=""), "endpoint"),
        (body(idempotency_key=None), "idempotency_key"),
        (body(idempotency_key="x" * 256), "longer than 255"),
        (body(trigger="DELAYED", idempotency_key=None, run_at="2026-03-15T18:00:00Z"), "idem"),
        (body(surprise=1), "surprise"),
        (body(run_at="2026-03-15T18:00:00Z"), "run_at"),
        (body(cron="* * * * *"), "cron"),
        (body(trigger="DELAYED"), "run_at"),
        (body(trigger="DELAYED", run_at="tomorrow"), "ISO 8601"),
        (body(trigger="DELAYED", run_at="2026-03-15T18:00:00"), "UTC offset"),
        (body(trigger="DELAYED", run_at=12), "ISO 8601"),
        (body(trigger="CRON", timezone="UTC"), "cron"),
        (body(trigger="CRON", cron="* * * * *"), "timezone"),
        (body(trigger="CRON", cron="* * * * *", timezone="Nowhere/City"), "timezone"),
        (
            body(trigger="CRON", cron="* * * * *", timezone="UTC", run_at="2026-03-15T18:00:00Z"),
            "run_at",
        ),
        (
            body(
                trigger="CRON",
                cron="* * * * *",
                timezone="UTC",
                starts_at="2026-03-16T00:00:00Z",
                ends_at="2026-03-16T00:00:00Z",
            ),
            "ends_at",
        ),
    ],
)
def test_invalid_bodies_are_400(payload: dict[str, Any], fragment: str) -> None:
    bad(payload, fragment)


def test_invalid_cron_is_422() -> None:
    bad(body(trigger="CRON", cron="61 * * * *", timezone="UTC"), "cron", InvalidCron)


def test_cron_may_carry_an_idempotency_key() -> None:
    request = parse_job_request(
        body(trigger="CRON", cron="* * * * *", timezone="UTC", idempotency_key="weekly"), now=NOW
    )
    assert request.idempotency_key == "weekly"


# -- PUT /jobs/{id} -----------------------------------------------------------------------

CURRENT = CronSchedule(
    expression="0 9 * * MON",
    timezone="Asia/Kolkata",
    starts_at=NOW,
    ends_at=NOW + timedelta(days=30),
)


def test_update_carries_unspecified_fields_over() -> None:
    change = parse_cron_update({"cron": "0 10 * * MON"}, current=CURRENT, current_input={"a": 1})
    assert change.schedule.expression == "0 10 * * MON"
    assert change.schedule.timezone == "Asia/Kolkata"
    assert change.schedule.ends_at == CURRENT.ends_at
    assert change.input == {"a": 1}


def test_update_can_clear_ends_at_and_replace_input() -> None:
    change = parse_cron_update(
        {"ends_at": None, "input": {"b": 2}}, current=CURRENT, current_input={"a": 1}
    )
    assert change.schedule.ends_at is None
    assert change.input == {"b": 2}


@pytest.mark.parametrize(
    "payload,error",
    [
        ({}, ValidationFailed),
        ({"trigger": "CRON"}, ValidationFailed),
        ({"cron": "bad"}, InvalidCron),
        ({"timezone": "Nowhere/City"}, ValidationFailed),
        ({"ends_at": "2026-03-01T00:00:00Z"}, ValidationFailed),
    ],
)
def test_update_rejections(payload: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        parse_cron_update(payload, current=CURRENT, current_input={})


def test_first_run_never_backfills_before_now() -> None:
    past = CronSchedule(
        expression="0 * * * *", timezone="UTC", starts_at=NOW - timedelta(days=3), ends_at=None
    )
    assert past.first_run(NOW) == NOW
    assert past.first_run(NOW + timedelta(minutes=1)) == NOW + timedelta(hours=1)


# -- input against the payload spec -------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {
        "user_id": {"type": "string"},
        "items": {"type": "array", "items": {"type": "integer"}},
    },
    "required": ["user_id"],
    "additionalProperties": False,
}


def test_every_violation_is_listed_with_its_path_sorted() -> None:
    with pytest.raises(InputValidationFailed) as info:
        validate_input(SCHEMA, {"items": [1, "two", "three"], "extra": True})
    message = info.value.message
    assert "(4 violations)" in message
    listed = message.split("violations): ", 1)[1].rstrip(".").split("; ")
    assert [item.split(": ", 1)[0] for item in listed] == ["$", "$", "$.items[1]", "$.items[2]"]
    assert "$: 'user_id' is a required property" in listed
    assert "$.items[1]: 'two' is not of type 'integer'" in listed


def test_valid_input_and_missing_schema_pass() -> None:
    validate_input(SCHEMA, {"user_id": "u", "items": [1]})
    validate_input(None, {"anything": True})


# -- snapshot -----------------------------------------------------------------------------


def test_retry_policy_defaults() -> None:
    assert retry_policy_with_defaults(None) == {
        "max_attempts": 1,
        "backoff": "exponential",
        "initial_delay_ms": 1000,
        "max_delay_ms": 60000,
    }
    assert retry_policy_with_defaults({"max_attempts": 5, "backoff": None})["backoff"] == (
        "exponential"
    )


def test_endpoint_snapshot_contract() -> None:
    row = {
        "name": "ep",
        "endpoint_type": "KAFKA",
        "spec": {"topic": "t"},
        "retry_policy": {"max_attempts": 3},
        "config_ref": "cfg",
        "payload_spec_ref": None,
    }
    snapshot = endpoint_snapshot(row)
    assert snapshot == {
        "name": "ep",
        "type": "KAFKA",
        # defaults applied
        "spec": {"topic": "t", "acks": "all", "timeout_ms": 10000, "value_template": "{{input}}"},
        "retry_policy": {
            "max_attempts": 3,
            "backoff": "exponential",
            "initial_delay_ms": 1000,
            "max_delay_ms": 60000,
        },
        "config_ref": "cfg",
        "payload_spec_ref": None,
    }


# -- filters ------------------------------------------------------------------------------


def test_job_filters() -> None:
    assert parse_job_filters({"trigger": "CRON", "status": "ACTIVE", "endpoint": "ep"}) == {
        "endpoint": "ep",
        "trigger_type": "CRON",
        "status": "ACTIVE",
    }
    assert parse_job_filters(None) == {"endpoint": None, "trigger_type": None, "status": None}
    for params in ({"trigger": "cron"}, {"status": "DONE"}, {"endpoint": " "}):
        with pytest.raises(ValidationFailed):
            parse_job_filters(params)


# -- long-poll ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "header,wait",
    [
        ("wait=10", 10),
        ("respond-async, wait=3", 3),
        ("WAIT = 4", 4),
        ('wait="5"', 5),
        ("wait=0", 0),
        ("wait=100", 25),
        ("wait=soon", None),
        ("wait=-1", None),
        ("wait=1.5", None),
        ("handling=lenient", None),
        ("", None),
        (None, None),
    ],
)
def test_prefer_wait(header: str | None, wait: int | None) -> None:
    assert parse_prefer_wait(header) == wait


def test_poller_returns_as_soon_as_done() -> None:
    clock = FakeClock()
    values = iter(["RUNNING", "RUNNING", "SUCCESS", "unreached"])
    poller = Poller(sleep=clock.sleep, monotonic=clock.monotonic, interval=0.2)
    assert poller.wait(lambda: next(values), lambda v: v == "SUCCESS", 10) == "SUCCESS"
    assert clock.sleeps == [0.2, 0.2]


def test_poller_gives_up_after_the_wait_with_the_last_snapshot() -> None:
    clock = FakeClock()
    reads: list[float] = []

    def fetch() -> str:
        reads.append(clock.monotonic())
        return "QUEUED"

    poller = Poller(sleep=clock.sleep, monotonic=clock.monotonic, interval=0.4)
    assert poller.wait(fetch, lambda v: v == "SUCCESS", 1) == "QUEUED"
    assert sum(clock.sleeps) == pytest.approx(1.0)
    assert clock.sleeps[-1] == pytest.approx(0.2)  # never sleeps past the deadline
    assert len(reads) == 4


def test_timezone_offsets_in_bodies_are_kept_as_instants() -> None:
    request = parse_job_request(
        body(trigger="DELAYED", run_at="2026-03-15T18:00:00-04:00"), now=NOW
    )
    assert request.run_at is not None
    assert request.run_at.utcoffset() == timezone(timedelta(hours=-4)).utcoffset(None)
    assert request.run_at == datetime(2026, 3, 15, 22, 0, tzinfo=UTC)
