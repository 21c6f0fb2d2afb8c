"""tests/support/promtext.py: scrapes laid on a grid and continued, without waiting (the
clock and the sleep are the test's)."""

from __future__ import annotations

import math

from tests.support.clock import FakeClock
from tests.support.promtext import Recording, duration_sec, key, parse, selector

TARGET = {"job": "te", "instance": "api"}
TEXT = """# HELP te_live_processes Processes.
# TYPE te_live_processes gauge
te_live_processes{kind="scheduler"} %s
te_live_processes{kind="worker"} 1
# TYPE te_oldest_due_lag_seconds gauge
te_oldest_due_lag_seconds %s
# TYPE te_attempt_duration_seconds gauge
te_attempt_duration_seconds{quantile="0.5"} NaN
"""


def test_a_line_becomes_a_sample_with_the_targets_labels() -> None:
    samples = parse('te_x{a="q\\"uote"} 2.5\n', TARGET)
    assert samples == {key("te_x", a='q"uote', job="te", instance="api"): 2.5}
    assert selector("te_x", {"b": 'q"', "a": "1"}) == 'te_x{a="1",b="q\\""}'


def test_scrapes_land_on_the_grid_and_a_failed_one_is_up_0() -> None:
    time = FakeClock(monotonic_start=100.0)
    recording = Recording(5.0, TARGET, clock=time.monotonic, sleep=time.sleep)
    recording.scrape(lambda: (200, TEXT % (1, 0)))
    time.advance(seconds=1.5)  # work between scrapes: the next one waits for the rest of the slot
    recording.scrape(lambda: (503, '{"error": {}}'))
    time.advance(
        seconds=9
    )  # late: no wait, and the slot it is in (14 s: slot 3), slot 2 left empty
    recording.scrape(lambda: (200, TEXT % (0, 12)))
    assert time.sleeps == [3.5, 0.0]
    assert [(c.slot, c.up, len(c.samples)) for c in recording.captures] == [
        (0, True, 4),
        (1, False, 0),
        (3, True, 4),
    ]


def test_the_timeline_holds_every_series_and_ages_the_lags_above_0() -> None:
    time = FakeClock(monotonic_start=100.0)
    recording = Recording(5.0, TARGET, clock=time.monotonic, sleep=time.sleep)
    recording.scrape(lambda: (200, TEXT % (1, 0)))
    recording.scrape(lambda: (200, TEXT % (0, 3)))
    timeline = recording.timeline(until_sec=20, ageing={"te_oldest_due_lag_seconds"})
    assert (timeline.slots, timeline.captured_slots) == (5, 2)
    values = timeline.values
    assert values[key("te_live_processes", kind="scheduler", **TARGET)] == [1, 0, 0, 0, 0]
    assert values[key("te_oldest_due_lag_seconds", **TARGET)] == [0, 3, 8, 13, 18]
    assert values[key("up", **TARGET)] == [1, 1, 1, 1, 1]
    quantiles = values[key("te_attempt_duration_seconds", quantile="0.5", **TARGET)]
    assert all(v is not None and math.isnan(v) for v in quantiles)
    by_series = {s["series"]: s["values"] for s in timeline.input_series()}
    assert by_series['te_oldest_due_lag_seconds{instance="api",job="te"}'] == (
        "0.0 3.0 8.0 13.0 18.0"
    )
    assert by_series['te_attempt_duration_seconds{instance="api",job="te",quantile="0.5"}'] == (
        "NaN NaN NaN NaN NaN"
    )
    lag = key("te_oldest_due_lag_seconds", **TARGET)
    assert timeline.first_slot(lag, lambda v: v > 10) == 3
    assert timeline.at(3) == 15


def test_a_lag_of_0_stays_0_and_a_missing_series_stays_missing() -> None:
    time = FakeClock(monotonic_start=100.0)
    recording = Recording(5.0, TARGET, clock=time.monotonic, sleep=time.sleep)
    recording.scrape(lambda: (200, TEXT % (1, 0) + "te_gone 1\n"))
    recording.scrape(lambda: (200, TEXT % (1, 0)))
    timeline = recording.timeline(until_sec=10, ageing={"te_oldest_due_lag_seconds"})
    assert timeline.values[key("te_oldest_due_lag_seconds", **TARGET)] == [0, 0, 0]
    assert timeline.values[key("te_gone", **TARGET)] == [1, None, None]
    assert {s["values"] for s in timeline.input_series() if "te_gone" in s["series"]} == {"1.0 _ _"}


def test_durations_in_seconds() -> None:
    assert (duration_sec("30s"), duration_sec("2m"), duration_sec("1h")) == (30, 120, 3600)
