"""The worker's delivery-rate meter (it sizes how far ahead the poller claims)."""

from __future__ import annotations

from chalicelib.worker.poller import RateMeter


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_rate_is_zero_until_a_period_has_passed() -> None:
    clock = Clock()
    meter = RateMeter(clock)
    for _ in range(50):
        meter.count()
    clock.now += RateMeter.PERIOD_SEC / 2
    assert meter.per_sec() == 0.0


def test_rate_is_events_over_the_last_completed_period() -> None:
    clock = Clock()
    meter = RateMeter(clock)
    for _ in range(300):
        meter.count()
    clock.now += 0.5
    assert meter.per_sec() == 600.0
    clock.now += 0.25  # mid-period: the last completed period's rate still holds
    meter.count()
    assert meter.per_sec() == 600.0
    clock.now += 0.25
    assert meter.per_sec() == 2.0  # one event in the next 0.5 s


def test_an_idle_period_brings_the_rate_down() -> None:
    clock = Clock()
    meter = RateMeter(clock)
    for _ in range(1000):
        meter.count()
    clock.now += 0.5
    assert meter.per_sec() == 2000.0
    clock.now += 10
    assert meter.per_sec() == 0.0
