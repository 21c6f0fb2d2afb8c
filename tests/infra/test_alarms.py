"""The queue lag and delivery failure rate alarms, in the synthesized templates.

They read the ``queue_health`` line the housekeeper logs once a minute
(``chalicelib/scheduler/queue_health.py``; tests/integration/scheduler/test_queue_health.py
checks its figures on the real database): here, that each field the code logs feeds a
metric from the log group the housekeeper writes to, that the alarms read those metrics
as docs/how-to/deploy.md says, and that the CloudWatch expression means what it says.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from conftest import REPO_ROOT, Synthesis

from chalicelib.scheduler.queue_health import EVENT, QueueHealth

PROFILES = ["synthesis", "lean_synthesis", "lean_fargate_synthesis"]


@pytest.fixture(scope="module")
def observability() -> Iterator[ModuleType]:
    """infra/stacks/observability.py, for its thresholds."""
    sys.path.insert(0, str(REPO_ROOT / "infra"))
    try:
        from stacks import observability

        yield observability
    finally:
        sys.path.remove(str(REPO_ROOT / "infra"))


@pytest.fixture(params=PROFILES)
def template(request: pytest.FixtureRequest) -> Synthesis:
    synthesis: Synthesis = request.getfixturevalue(request.param)
    return synthesis


def _alarm(synthesis: Synthesis, prefix: str) -> dict[str, Any]:
    (alarm,) = [
        resource["Properties"]
        for logical_id, resource in synthesis.resources("AWS::CloudWatch::Alarm").items()
        if logical_id.startswith(f"Alarms{prefix}Alarm")
    ]
    return alarm


def test_every_figure_the_code_logs_feeds_a_metric_from_the_housekeepers_log_group(
    template: Synthesis, observability: ModuleType
) -> None:
    filters = [
        f["Properties"]
        for f in template.resources("AWS::Logs::MetricFilter").values()
        if f["Properties"]["FilterPattern"] == f'{{ $.event = "{EVENT}" }}'
    ]
    transformations = {
        f["MetricTransformations"][0]["MetricValue"]: (
            f["MetricTransformations"][0]["MetricNamespace"],
            f["MetricTransformations"][0]["MetricName"],
        )
        for f in filters
    }
    logged = set(QueueHealth.__dataclass_fields__) - {"minute"}
    assert transformations == {
        f"$.{field}": ("TaskExecutor", observability.QUEUE_HEALTH_METRICS[field])
        for field in logged
    }
    # The housekeeper runs beside the reclaimer: its function's log group, and only it.
    groups = {str(f["LogGroupName"]) for f in filters}
    assert len(groups) == 1 and "ReclaimStuckExecutions" in groups.pop()


def test_the_lag_alarm_reads_each_minutes_maximum(
    template: Synthesis, observability: ModuleType
) -> None:
    alarm = _alarm(template, "QueueLag")
    assert (alarm["Namespace"], alarm["MetricName"]) == ("TaskExecutor", "OldestDueLagSeconds")
    assert (alarm["Statistic"], alarm["Period"]) == ("Maximum", 60)
    assert alarm["Threshold"] == observability.LAG_THRESHOLD_SEC == 120
    minutes = observability.LAG_MINUTES
    assert alarm["EvaluationPeriods"] == alarm["DatapointsToAlarm"] == minutes == 5
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["TreatMissingData"] == "notBreaching"
    assert alarm["AlarmActions"]


def test_the_failure_rate_alarm_divides_failed_by_attempts_per_minute(
    template: Synthesis, observability: ModuleType
) -> None:
    alarm = _alarm(template, "DeliveryFailureRate")
    assert "MetricName" not in alarm
    queries = {q["Id"]: q for q in alarm["Metrics"]}
    (returned,) = [q for q in alarm["Metrics"] if q.get("ReturnData", True)]
    read = {
        query_id: (q["MetricStat"]["Metric"]["MetricName"], q["MetricStat"]["Stat"])
        for query_id, q in queries.items()
        if "MetricStat" in q
    }
    assert read == {
        "attempts": ("DeliveryAttempts", "Maximum"),
        "failed": ("DeliveryAttemptsFailed", "Maximum"),
    }
    assert all(q["MetricStat"]["Period"] == 60 for q in queries.values() if "MetricStat" in q)
    assert alarm["Threshold"] == observability.FAILURE_RATE_PERCENT == 20
    minutes = observability.FAILURE_RATE_MINUTES
    assert alarm["EvaluationPeriods"] == alarm["DatapointsToAlarm"] == minutes == 5
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["TreatMissingData"] == "notBreaching"
    assert alarm["AlarmActions"]

    expression = returned["Expression"]
    assert expression == "IF(attempts >= 5, 100 * failed / attempts, 0)"

    def percent(attempts: int, failed: int) -> float:
        """The expression, evaluated as CloudWatch does: IF(condition, then, else)."""
        match = re.fullmatch(r"IF\((.+?), (.+?), (.+?)\)", expression)
        assert match
        scope = {"attempts": attempts, "failed": failed}
        condition, then, otherwise = (match[i] for i in (1, 2, 3))
        return float(eval(then if eval(condition, {}, scope) else otherwise, {}, scope))  # noqa: S307

    threshold = alarm["Threshold"]
    assert percent(attempts=10, failed=3) > threshold  # 30 %
    assert percent(attempts=10, failed=2) == threshold  # 20 %: not above
    assert percent(attempts=4, failed=4) == 0  # too few attempts to judge
    assert percent(attempts=0, failed=0) == 0


def test_the_deploy_page_states_the_thresholds_of_the_code(observability: ModuleType) -> None:
    page = (REPO_ROOT / "docs" / "how-to" / "deploy.md").read_text()
    lag = observability.LAG_THRESHOLD_SEC, observability.LAG_MINUTES
    assert f"`OldestDueLagSeconds` above {lag[0]} in {lag[1]} minutes in a row" in page
    rate = (
        observability.FAILURE_RATE_MIN_ATTEMPTS,
        observability.FAILURE_RATE_PERCENT,
        observability.FAILURE_RATE_MINUTES,
    )
    assert (
        f"`IF(attempts >= {rate[0]}, 100 * failed / attempts, 0)` above {rate[1]} (%) "
        f"in {rate[2]} minutes in a row"
    ) in page
