"""Pure parts of flow control: the definition's validation, the Retry-After hold
and how often a worker makes metered claims."""

from __future__ import annotations

from typing import Any

import pytest

from chalicelib.domain.backoff import MAX_ENDPOINT_HOLD_MS, endpoint_hold_ms
from chalicelib.domain.endpoints import parse_endpoint, validate_flow_control
from chalicelib.errors import ValidationFailed
from chalicelib.worker.flow import METERED_INTERVAL, Controls
from chalicelib.worker.store import Controlled

HOOK: dict[str, Any] = {
    "name": "hook",
    "type": "HTTP",
    "spec": {"url": "https://example.test/hook", "method": "POST"},
}


def test_flow_control_parts_are_optional_and_kept_as_given() -> None:
    rate = {"rate_limit": {"limit": 100, "period_ms": 1000}}
    assert validate_flow_control(rate) == rate
    assert validate_flow_control({"max_concurrency": 5}) == {"max_concurrency": 5}
    assert validate_flow_control({**rate, "max_concurrency": 5}) == {**rate, "max_concurrency": 5}
    # Nothing set is no flow control: the endpoint stays on the claim's fast path.
    assert validate_flow_control(None) is None
    assert validate_flow_control({}) is None
    assert validate_flow_control({"rate_limit": None, "max_concurrency": None}) is None


def test_the_definition_carries_flow_control() -> None:
    assert parse_endpoint(HOOK).flow_control is None
    flow = {"max_concurrency": 3}
    assert parse_endpoint({**HOOK, "flow_control": flow}).flow_control == flow


@pytest.mark.parametrize(
    ("flow", "where"),
    [
        ([], "flow_control"),
        ({"burst": 1}, "flow_control"),
        ({"rate_limit": 5}, "flow_control.rate_limit"),
        ({"rate_limit": {"period_ms": 1000}}, "flow_control.rate_limit"),
        ({"rate_limit": {"limit": 1, "period_ms": 1000, "x": 1}}, "flow_control.rate_limit"),
        ({"rate_limit": {"limit": 100_001, "period_ms": 1000}}, "flow_control.rate_limit.limit"),
        ({"rate_limit": {"limit": 1, "period_ms": 1.5}}, "flow_control.rate_limit.period_ms"),
        (
            {"rate_limit": {"limit": 1, "period_ms": 86_400_001}},
            "flow_control.rate_limit.period_ms",
        ),
        ({"max_concurrency": "5"}, "flow_control.max_concurrency"),
        ({"max_concurrency": False}, "flow_control.max_concurrency"),
    ],
)
def test_bad_flow_control_names_the_field(flow: Any, where: str) -> None:
    with pytest.raises(ValidationFailed) as caught:
        validate_flow_control(flow)
    assert f"'{where}'" in caught.value.message


@pytest.mark.parametrize(
    ("retry_after_ms", "hold"),
    [
        (None, None),
        (0, None),
        (3000, 3000),
        (MAX_ENDPOINT_HOLD_MS, MAX_ENDPOINT_HOLD_MS),
        (7_200_000, MAX_ENDPOINT_HOLD_MS),
    ],
)
def test_a_retry_after_holds_the_endpoint_at_most_an_hour(
    retry_after_ms: int | None, hold: int | None
) -> None:
    assert endpoint_hold_ms(retry_after_ms) == hold
    assert MAX_ENDPOINT_HOLD_MS == 3_600_000


class _Store:
    """The controlled endpoints as a store lists them, and how often they were read."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows
        self.reads = 0

    def controlled(self) -> Controlled:
        self.reads += 1
        return Controlled(
            excluded=tuple(row["name"] for row in self.rows),
            metered=tuple(row["name"] for row in self.rows if row["metered"]),
        )


def test_controls_are_read_once_per_poll_interval_and_meter_at_their_pace() -> None:
    now = [100.0]
    db = _Store([{"name": "a", "metered": True}, {"name": "p", "metered": False}])
    controls = Controls(db, 0.2, clock=lambda: now[0])

    controls.refresh()
    controls.refresh()
    assert db.reads == 1
    assert (controls.excluded, controls.metered) == (("a", "p"), ("a",))
    assert controls.metered_due() == ("a",)
    assert controls.metered_due() == ()  # not again within METERED_INTERVAL
    assert controls.idle_sleep(0.2) == METERED_INTERVAL
    now[0] += 0.2
    controls.refresh()
    assert db.reads == 2 and controls.metered_due() == ("a",)
    db.rows = []
    controls.refresh(force=True)
    assert controls.excluded == () and controls.metered_due() == ()
    assert controls.idle_sleep(0.2) == 0.2
