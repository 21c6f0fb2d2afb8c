"""The worker's claim loop never ends on a failure: it pauses and reports."""

from __future__ import annotations

from chalicelib.domain.loops import LoopPhase
from chalicelib.errors import DatabaseUnavailable
from chalicelib.runtime.registry import LoopRegistry
from chalicelib.worker.reporting import CLAIM_LOOP, ClaimLoopHealth


def test_an_outage_retries_every_poll_interval_and_a_bug_backs_off_to_30_s() -> None:
    registry = LoopRegistry()
    health = ClaimLoopHealth(registry, poll_interval_sec=0.2)
    assert [health.failed(DatabaseUnavailable("down")) for _ in range(3)] == [0.2] * 3
    assert registry.state(CLAIM_LOOP).down is False  # an outage: /health says the database
    health.succeeded()
    pauses = [health.failed(RuntimeError("bug")) for _ in range(10)]
    assert pauses[:4] == [0.4, 0.8, 1.6, 3.2]
    assert pauses[-1] == 30.0
    state = registry.state(CLAIM_LOOP)
    assert (state.phase, state.error, state.down) == (LoopPhase.FAILING, "RuntimeError", True)
    health.succeeded()
    assert registry.state(CLAIM_LOOP).phase is LoopPhase.RUNNING
