"""The overview's pure parts: the minute series and a worker's shown status."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from chalicelib.services.overview import minute_series, worker_status

NOW = datetime(2026, 3, 15, 10, 30, 42, 500, tzinfo=UTC)


def test_sixty_minutes_oldest_first_ending_with_the_current_one() -> None:
    rows = [
        (datetime(2026, 3, 15, 10, 30, tzinfo=UTC), 3, 1),
        (datetime(2026, 3, 15, 9, 31, tzinfo=UTC), 2, None),
    ]
    series = minute_series(rows, NOW)
    assert len(series) == 60
    assert series[0].minute == datetime(2026, 3, 15, 9, 31, tzinfo=UTC)
    assert series[-1].minute == datetime(2026, 3, 15, 10, 30, tzinfo=UTC)
    assert (series[0].succeeded, series[0].failed) == (2, 0)
    assert (series[-1].succeeded, series[-1].failed) == (3, 1)
    assert sum(m.succeeded + m.failed for m in series[1:-1]) == 0
    steps = {b.minute - a.minute for a, b in itertools.pairwise(series)}
    assert steps == {timedelta(minutes=1)}


def test_a_worker_is_dead_when_it_said_so_or_fell_silent() -> None:
    assert worker_status("ALIVE", NOW - timedelta(seconds=29), NOW) == "ALIVE"
    assert worker_status("ALIVE", NOW - timedelta(seconds=31), NOW) == "DEAD"
    assert worker_status("DEAD", NOW, NOW) == "DEAD"
