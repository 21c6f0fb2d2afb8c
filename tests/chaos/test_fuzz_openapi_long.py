"""The ≥1,000-request schemathesis run of the hostile-input fuzzing, random seeds each run."""

from __future__ import annotations

import time

import pytest

from tests.chaos.figures import write_figures
from tests.security.fuzzing import fuzz

pytestmark = pytest.mark.chaos

MIN_REQUESTS = 1000


def test_a_thousand_generated_requests_get_no_5xx_and_conform(app_env: dict[str, str]) -> None:
    started = time.monotonic()
    report = fuzz(examples_per_operation=20, derandomize=False)
    write_figures(
        "fuzz_openapi",
        {
            "requests": report.requests,
            "by_status": {str(k): v for k, v in sorted(report.by_status.items())},
            "server_errors": report.server_errors,
            "nonconforming": len(report.failures),
            "failures": report.failures,
            "duration_s": round(time.monotonic() - started, 1),
        },
    )

    assert report.requests >= MIN_REQUESTS, report.summary()
    assert report.server_errors == 0, report.summary()
    assert report.failures == [], report.summary()
