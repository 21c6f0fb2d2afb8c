"""The one definition of health, shared by jobs and endpoints."""

from __future__ import annotations

import pytest

from chalicelib.domain.health import WINDOW, Health, compute_health
from chalicelib.services import overview
from chalicelib.services.jobs import status as job_status


@pytest.mark.parametrize(
    "total,succeeded,failed,health",
    [
        (0, 0, 0, Health.IDLE),
        (3, 0, 0, Health.HEALTHY),  # nothing finished yet
        (100, 91, 9, Health.HEALTHY),
        (100, 90, 10, Health.DEGRADED),  # 10 %: DEGRADED
        (100, 51, 49, Health.DEGRADED),
        (100, 50, 50, Health.FAILING),  # 50 %: FAILING
        (2, 0, 2, Health.FAILING),
        (10, 1, 0, Health.HEALTHY),  # cancelled and in-flight ones count for neither
        (20, 19, 1, Health.HEALTHY),  # one failure among many is not DEGRADED
        (5, 1, 1, Health.FAILING),
    ],
)
def test_health_thresholds(total: int, succeeded: int, failed: int, health: Health) -> None:
    assert compute_health(total=total, succeeded=succeeded, failed=failed) is health


def test_jobs_and_endpoints_count_over_the_same_window() -> None:
    assert job_status.STATS_WINDOW == WINDOW
    assert overview.HEALTH_WINDOW == WINDOW
