"""FailureLog: one traceback, then one counted line per interval, then one recovery line."""

from __future__ import annotations

import logging

import pytest

from chalicelib.errors import DatabaseUnavailable
from chalicelib.logs import FailureLog
from tests.support.clock import FakeClock


def _events(caplog: pytest.LogCaptureFixture) -> list[tuple[str, int]]:
    return [(getattr(r, "event", "-"), r.levelno) for r in caplog.records]


def test_an_outage_is_one_traceback_then_a_line_per_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock(monotonic_start=100.0)
    failures = FailureLog(logging.getLogger("t"), "claim", interval_sec=30, clock=clock.monotonic)
    with caplog.at_level(logging.INFO, logger="t"):
        for _ in range(360):  # 90 s of failures every 250 ms
            failures.failed(DatabaseUnavailable("connection refused"))
            clock.advance(seconds=0.25)
        failures.succeeded()
        failures.succeeded()
    assert _events(caplog) == [
        ("failing", logging.ERROR),
        ("still_failing", logging.WARNING),
        ("still_failing", logging.WARNING),
        ("recovered", logging.INFO),
    ]
    first, *_, recovered = caplog.records
    assert first.exc_info is not None and "connection refused" in first.getMessage()
    assert [getattr(r, "failures", None) for r in caplog.records[1:3]] == [120, 120]
    assert getattr(recovered, "failures", None) == 360
    assert all(r.exc_info is None for r in caplog.records[1:])


def test_a_new_outage_after_recovery_gets_its_traceback_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock(monotonic_start=100.0)
    failures = FailureLog(logging.getLogger("t"), "claim", clock=clock.monotonic)
    with caplog.at_level(logging.INFO, logger="t"):
        failures.failed(DatabaseUnavailable("a"))
        failures.succeeded()
        failures.failed(DatabaseUnavailable("b"))
    assert [e for e, _ in _events(caplog)] == ["failing", "recovered", "failing"]
    assert caplog.records[2].exc_info is not None
