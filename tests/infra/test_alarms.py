"""The queue lag, delivery failure rate and stopped-process alarms, in the synthesized
templates.

They read the ``queue_health`` line the housekeeper logs once a minute
(``chalicelib/scheduler/queue_health.py``; tests/integration/scheduler/test_queue_health.py
checks its figures on the real database): here, that each field the code logs feeds a
metric from the log group the housekeeper writes to, that the alarms read those metrics
as docs/how-to/deploy.md and docs/how-to/alerts.md say, that the CloudWatch expression
means what it says, and that a scheduler that stops logging, or a scheduled function
EventBridge stops invoking, is an alarm rather than a silence.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from chalicelib.scheduler.queue_health import EVENT, QueueHealth
from tests.support.infra import REPO_ROOT, Synthesis

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


def _reads(alarm: dict[str, Any]) -> tuple[str, str, str, int]:
    return alarm["Namespace"], alarm["MetricName"], alarm["Statistic"], alarm["Period"]


def test_a_stopped_worker_is_live_workers_below_1_for_2_minutes(
    template: Synthesis, observability: ModuleType
) -> None:
    alarm = _alarm(template, "WorkerStopped")
    assert _reads(alarm) == ("TaskExecutor", "LiveWorkers", "Maximum", 60)
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("LessThanThreshold", 1)
    minutes = observability.WORKER_STOPPED_MINUTES
    assert alarm["EvaluationPeriods"] == alarm["DatapointsToAlarm"] == minutes == 2
    # No line: the scheduler is down and SchedulerStopped says so; the line says the workers.
    assert alarm["TreatMissingData"] == "notBreaching"
    assert alarm["AlarmActions"]


def test_a_stopped_scheduler_is_its_queue_health_line_missing_for_3_minutes(
    template: Synthesis, observability: ModuleType
) -> None:
    alarm = _alarm(template, "SchedulerStopped")
    assert _reads(alarm) == ("TaskExecutor", "LiveSchedulers", "Maximum", 60)
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("LessThanThreshold", 1)
    minutes = observability.SCHEDULER_STOPPED_MINUTES
    assert alarm["EvaluationPeriods"] == alarm["DatapointsToAlarm"] == minutes == 3
    assert alarm["TreatMissingData"] == "breaching"  # the line missing is the alarm
    assert alarm["AlarmActions"]


def test_what_silences_the_lag_alarm_raises_the_scheduler_alarm(template: Synthesis) -> None:
    """QueueLag treats a minute without a line as not breaching (there is no lag to read);
    SchedulerStopped reads a field of the same line, from the same log group, as breaching."""
    lag, stopped = _alarm(template, "QueueLag"), _alarm(template, "SchedulerStopped")
    assert (lag["TreatMissingData"], stopped["TreatMissingData"]) == ("notBreaching", "breaching")
    source = {
        f["Properties"]["MetricTransformations"][0]["MetricName"]: (
            f["Properties"]["FilterPattern"],
            str(f["Properties"]["LogGroupName"]),
        )
        for f in template.resources("AWS::Logs::MetricFilter").values()
    }
    assert source[lag["MetricName"]] == source[stopped["MetricName"]]
    assert source[lag["MetricName"]][0] == f'{{ $.event = "{EVENT}" }}'


def test_every_scheduled_function_has_an_alarm_for_when_it_is_no_longer_invoked(
    template: Synthesis, observability: ModuleType
) -> None:
    scheduled = {
        logical_id
        for logical_id, function in template.resources("AWS::Serverless::Function").items()
        if any(
            event["Type"] == "Schedule"
            for event in function["Properties"].get("Events", {}).values()
        )
    }
    assert {"MaterializeCronTicks", "PromoteDelayedExecutions", "ReclaimStuckExecutions"} <= (
        scheduled
    )
    alarms = {
        alarm["Properties"]["Dimensions"][0]["Value"]["Ref"]: alarm["Properties"]
        for logical_id, alarm in template.resources("AWS::CloudWatch::Alarm").items()
        if "NotInvokedAlarm" in logical_id
    }
    assert set(alarms) == scheduled  # the API handler is invoked by requests: none for it
    minutes = observability.SCHEDULER_STOPPED_MINUTES
    for alarm in alarms.values():
        assert _reads(alarm) == ("AWS/Lambda", "Invocations", "Sum", 60)
        assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("LessThanThreshold", 1)
        assert alarm["EvaluationPeriods"] == alarm["DatapointsToAlarm"] == minutes
        # Lambda publishes nothing for a minute without an invocation: missing is the alarm.
        assert alarm["TreatMissingData"] == "breaching"
        assert alarm["AlarmActions"]


def test_the_alerts_page_states_the_stopped_process_alarms_of_the_code(
    observability: ModuleType,
) -> None:
    page = (REPO_ROOT / "docs" / "how-to" / "alerts.md").read_text()
    worker, scheduler = (
        observability.WORKER_STOPPED_MINUTES,
        observability.SCHEDULER_STOPPED_MINUTES,
    )
    assert f"`LiveWorkers` below 1 in {worker} minutes in a row" in page
    assert f"`LiveSchedulers` below 1 or missing in {scheduler} minutes in a row" in page
    assert f"`Invocations` below 1 or missing in {scheduler} minutes in a row" in page
    lag = observability.LAG_THRESHOLD_SEC, observability.LAG_MINUTES
    assert f"`OldestDueLagSeconds` above {lag[0]} in {lag[1]} minutes in a row" in page
