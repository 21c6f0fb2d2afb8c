"""Cron ticks across DST transitions (pure; no clock, no database)."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from chalicelib.domain import cron
from chalicelib.domain.jobs import CronSchedule
from chalicelib.errors import InvalidCron, ValidationFailed

NEW_YORK = ZoneInfo("America/New_York")
BERLIN = ZoneInfo("Europe/Berlin")
KOLKATA = ZoneInfo("Asia/Kolkata")


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def ticks(expression: str, zone: ZoneInfo, after: datetime, count: int) -> list[datetime]:
    result = []
    for _ in range(count):
        after = cron.next_tick(expression, zone, after)
        result.append(after)
    return result


def test_new_york_spring_forward_skips_the_missing_local_time() -> None:
    # 2027-03-14: 02:00 EST jumps to 03:00 EDT, so 02:30 does not exist that day.
    assert ticks("30 2 * * *", NEW_YORK, utc(2027, 3, 12, 12), 3) == [
        utc(2027, 3, 13, 7, 30),  # 02:30 EST
        utc(2027, 3, 15, 6, 30),  # 02:30 EDT; the 14th is skipped
        utc(2027, 3, 16, 6, 30),
    ]


def test_new_york_fall_back_fires_once_at_the_first_occurrence() -> None:
    # 2027-11-07: 02:00 EDT falls back to 01:00 EST, so 01:30 happens twice.
    assert ticks("30 1 * * *", NEW_YORK, utc(2027, 11, 6, 12), 2) == [
        utc(2027, 11, 7, 5, 30),  # 01:30 EDT (first occurrence only)
        utc(2027, 11, 8, 6, 30),  # next day, 01:30 EST
    ]
    # Asking from inside the repeated hour does not fire the second occurrence.
    assert cron.next_tick("30 1 * * *", NEW_YORK, utc(2027, 11, 7, 6)) == utc(2027, 11, 8, 6, 30)


def test_new_york_half_past_two_on_fall_back_day_is_unambiguous() -> None:
    assert cron.next_tick("30 2 * * *", NEW_YORK, utc(2027, 11, 6, 12)) == utc(2027, 11, 7, 7, 30)


def test_sub_hourly_schedule_jumps_over_the_gap() -> None:
    # 01:30 EST, then 02:00 and 02:30 do not exist: next is 03:00 EDT.
    assert ticks("*/30 * * * *", NEW_YORK, utc(2027, 3, 14, 6, 0), 2) == [
        utc(2027, 3, 14, 6, 30),
        utc(2027, 3, 14, 7, 0),
    ]


def test_berlin_both_transitions() -> None:
    # 2027-03-28 02:00 CET -> 03:00 CEST; 2027-10-31 03:00 CEST -> 02:00 CET.
    assert ticks("30 2 * * *", BERLIN, utc(2027, 3, 27, 12), 1) == [utc(2027, 3, 29, 0, 30)]
    assert ticks("30 2 * * *", BERLIN, utc(2027, 10, 30, 12), 2) == [
        utc(2027, 10, 31, 0, 30),  # 02:30 CEST, the first of the two
        utc(2027, 11, 1, 1, 30),  # 02:30 CET the next day
    ]


def test_kolkata_has_no_dst_and_renders_its_half_hour_offset() -> None:
    tick = cron.first_tick("0 9 * * MON", KOLKATA, utc(2026, 3, 15, 10))
    assert tick == utc(2026, 3, 16, 3, 30)
    assert cron.render_local(tick, KOLKATA) == "2026-03-16T09:00:00+05:30"
    assert ticks("0 9 * * MON", KOLKATA, tick, 1) == [utc(2026, 3, 23, 3, 30)]


def test_first_tick_includes_a_tick_exactly_at_the_start() -> None:
    start = utc(2026, 3, 16, 3, 30)
    assert cron.first_tick("0 9 * * MON", KOLKATA, start) == start
    assert cron.next_tick("0 9 * * MON", KOLKATA, start) == utc(2026, 3, 23, 3, 30)


def test_render_local_keeps_none() -> None:
    assert cron.render_local(None, NEW_YORK) is None


@pytest.mark.parametrize(
    "expression",
    ["* * * *", "* * * * * *", "61 * * * *", "* 25 * * *", "nonsense here a b c", 5, ""],
)
def test_invalid_expressions_are_422(expression: object) -> None:
    with pytest.raises(InvalidCron):
        cron.validate_cron(expression)


def test_expression_that_never_fires_is_rejected() -> None:
    with pytest.raises(InvalidCron):
        cron.validate_cron("0 0 30 2 *")


def test_valid_expression_is_normalized() -> None:
    assert cron.validate_cron("0  9 * *   MON") == "0 9 * * MON"


@pytest.mark.parametrize(
    "name",
    [
        "Mars/Olympus",
        "",
        "../etc/passwd",
        "/etc/localtime",
        7,
        "A" * 256,  # zoneinfo raised OSError (file name too long): was a 500
        "Europe/" + "x" * 300,
        "localtime",  # the host's own setting, not a place
        "posixrules",
        "Factory",
        "posix/Europe/Paris",  # exists in Debian's tree, not in the tz database
        "right/UTC",
    ],
)
def test_unknown_or_host_dependent_timezone_is_400(name: object) -> None:
    with pytest.raises(ValidationFailed) as raised:
        cron.parse_timezone(name)
    assert len(str(raised.value)) < 200


def test_every_listed_zone_loads_and_common_ones_are_listed() -> None:
    names = cron.iana_zone_names()
    assert {"UTC", "Asia/Kolkata", "America/New_York", "Etc/GMT+5"} <= names
    assert not names & cron.HOST_DEPENDENT_ZONES
    for name in sorted(names):
        assert cron.parse_timezone(name).key == name


# -- bounded cost -----------------------------------------------------------------------


def test_an_expression_past_the_length_limit_is_422_before_it_is_parsed() -> None:
    over = "10" + ",0" * 124 + " * * * *"
    assert len(over) == cron.MAX_CRON_LENGTH + 2
    with pytest.raises(InvalidCron, match=f"at most {cron.MAX_CRON_LENGTH}"):
        cron.validate_cron(over)
    at_limit = "10" + ",0" * 123 + " * * * *"
    assert cron.validate_cron(at_limit) == at_limit


def test_no_tick_is_computed_for_a_stored_expression_past_the_limit() -> None:
    """One stored before the limit: the scheduler sets its job aside with this message."""
    stored = "0," + ",".join(["*/1"] * 1000) + " * * * *"
    with pytest.raises(InvalidCron, match="characters long"):
        cron.next_tick(stored, NEW_YORK, utc(2027, 1, 1))


# -- the end of the supported range -------------------------------------------------------

ADAK = ZoneInfo("America/Adak")


@pytest.mark.parametrize(
    ("expression", "zone"), [("0 0 1 1 *", ADAK), ("0 0 29 2 *", ZoneInfo("UTC"))]
)
def test_no_first_tick_past_the_supported_range(expression: str, zone: ZoneInfo) -> None:
    start = utc(9998, 6, 1)
    assert cron.first_tick_in_range(expression, zone, start) is None
    assert cron.first_tick_in_range("0 0 1 6 *", zone, start) is not None
    schedule = CronSchedule(expression=expression, timezone=zone.key, starts_at=start, ends_at=None)
    with pytest.raises(InvalidCron, match="never fires between 9998-06-01T00:00:00Z"):
        schedule.first_run(start)
    ending = CronSchedule(
        expression=expression, timezone=zone.key, starts_at=start, ends_at=utc(9998, 12, 1)
    )
    assert ending.first_run(start) == utc(9998, 12, 1)  # its retirement tick
