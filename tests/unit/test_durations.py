"""Durations (``parse_duration``) and a DELAYED job's time given as ``run_at`` or ``delay``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chalicelib.domain.jobs import parse_job_request, parse_reschedule, parse_run_at
from chalicelib.domain.timefmt import format_duration, parse_duration
from chalicelib.errors import ValidationFailed

NOW = datetime(2026, 3, 15, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("250ms", timedelta(milliseconds=250)),
        ("90s", timedelta(seconds=90)),
        ("15m", timedelta(minutes=15)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("2d", timedelta(days=2)),
        ("1d2h3m4s5ms", timedelta(days=1, hours=2, minutes=3, seconds=4, milliseconds=5)),
        ("0h1ms", timedelta(milliseconds=1)),
        ("36h", timedelta(hours=36)),
    ],
)
def test_a_duration_is_its_parts_summed(text: str, expected: timedelta) -> None:
    assert parse_duration(text, "delay") == expected


@pytest.mark.parametrize(
    ("milliseconds", "text"),
    [(250, "250ms"), (90_000, "1m30s"), (5_400_000, "1h30m"), (93_784_005, "1d2h3m4s5ms")],
)
def test_a_duration_is_written_as_it_is_read(milliseconds: int, text: str) -> None:
    assert format_duration(milliseconds) == text
    assert parse_duration(text, "expire_after") == timedelta(milliseconds=milliseconds)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "5",
        "s",
        "-5s",
        "+5s",
        "1.5h",
        "1h 30m",
        " 1s",
        "1s ",
        "1S",
        "30m1h",
        "1s1s",
        "1ms1s",
        "1w",
        "1x",
        "0x10s",
        "9" * 13 + "d",
        "1" + "0" * 70 + "s",
        90,
        1.5,
        None,
        True,
        ["1s"],
        {"s": 1},
    ],
)
def test_anything_else_is_400_naming_the_field(value: Any) -> None:
    with pytest.raises(ValidationFailed, match="Field 'expire_after' must be a duration such as"):
        parse_duration(value, "expire_after")


@pytest.mark.parametrize("text", ["0s", "0ms", "0d0h0m0s0ms"])
def test_zero_is_not_a_positive_duration(text: str) -> None:
    with pytest.raises(ValidationFailed, match="Field 'delay' must be a positive duration"):
        parse_duration(text, "delay")


def test_a_duration_longer_than_the_range_of_instants_is_refused() -> None:
    with pytest.raises(ValidationFailed, match="Field 'delay' is longer than the range"):
        parse_duration("999999999999d", "delay")


def delayed(**timing: Any) -> dict[str, Any]:
    return {"endpoint": "ep", "trigger": "DELAYED", "idempotency_key": "k", **timing}


def test_a_delayed_job_runs_its_delay_after_now() -> None:
    request = parse_job_request(delayed(delay="90s"), now=NOW)
    assert request.run_at == NOW + timedelta(seconds=90)


def test_run_at_still_works_and_both_or_neither_are_refused() -> None:
    assert parse_run_at({"run_at": "2030-01-01T00:00:00Z"}, now=NOW) == datetime(
        2030, 1, 1, tzinfo=UTC
    )
    with pytest.raises(ValidationFailed, match="'run_at' and 'delay' exclude each other"):
        parse_run_at({"run_at": "2030-01-01T00:00:00Z", "delay": "1s"}, now=NOW)
    with pytest.raises(ValidationFailed, match=r"Missing required field: run_at \(or delay\)"):
        parse_run_at({}, now=NOW)


def test_a_delay_past_the_last_accepted_instant_is_refused() -> None:
    late = datetime(9998, 12, 31, 23, 0, tzinfo=UTC)
    with pytest.raises(ValidationFailed, match="Field 'delay' puts run_at past 9999-01-01"):
        parse_run_at({"delay": "1h"}, now=late)
    assert parse_run_at({"delay": "59m"}, now=late) == late + timedelta(minutes=59)


def test_a_reschedule_takes_only_run_at_or_delay() -> None:
    assert parse_reschedule({"delay": "15m"}, now=NOW) == NOW + timedelta(minutes=15)
    with pytest.raises(ValidationFailed, match="Unknown field"):
        parse_reschedule({"delay": "15m", "input": {}}, now=NOW)
