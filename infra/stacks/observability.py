"""Metric filters and alarms over the services' JSON log lines.

The app logs one JSON object per line (``TE_LOG_FORMAT=json``) with the event name in
``event`` (``chalicelib.logs.log_event``). Two events matter to an operator:

``execution_failed``
    an execution reached FAILED (retries exhausted, or its lease expired with no attempts
    left). Logged by the worker (Lambda and Fargate) and by the reclaimer.
``reclaimed``
    the reclaimer returned one execution whose lease expired to RETRYING or FAILED: a
    worker died or overran its lease.

Each becomes a CloudWatch metric in the ``TaskExecutor`` namespace (one data point per log
line) with an alarm that notifies an SNS topic. Lambda ``Errors`` (an unhandled exception
in an entry point) get one alarm per function.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

NAMESPACE = "TaskExecutor"
FAILED_EVENT = "execution_failed"
RECLAIMED_EVENT = "reclaimed"


@dataclass(frozen=True, kw_only=True)
class EventMetric:
    """One log event counted as a metric, over the log groups that can emit it."""

    event: str
    metric_name: str
    log_group_names: Sequence[str]

    @property
    def filter_pattern(self) -> logs.IFilterPattern:
        """``{ $.event = "<event>" }`` on the JSON log line."""
        return logs.FilterPattern.string_value("$.event", "=", self.event)


class Observability(Construct):
    """SNS topic, event metrics + alarms, and Lambda error alarms."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        failed: EventMetric,
        reclaimed: EventMetric,
        failed_threshold: int,
        reclaimed_threshold: int,
        lambda_function_names: dict[str, str],
        alarm_email: str | None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = sns.Topic(self, "AlarmTopic", enforce_ssl=True)
        if alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(alarm_email))
        self._action = cw_actions.SnsAction(self.topic)

        self.failed_alarm = self._event_alarm(
            "ExecutionsFailed",
            failed,
            failed_threshold,
            "Executions reached FAILED (retries exhausted or lease expired).",
        )
        self.reclaimed_alarm = self._event_alarm(
            "ExecutionsReclaimed",
            reclaimed,
            reclaimed_threshold,
            "The reclaimer returned executions whose lease expired: a worker died or "
            "overran its lease.",
        )
        self.lambda_error_alarms = [
            self._lambda_errors_alarm(logical_id, function_name)
            for logical_id, function_name in lambda_function_names.items()
        ]

    def _event_alarm(
        self, construct_id: str, metric: EventMetric, threshold: int, description: str
    ) -> cloudwatch.Alarm:
        for index, log_group_name in enumerate(metric.log_group_names):
            logs.MetricFilter(
                self,
                f"{construct_id}Filter{index}",
                log_group=logs.LogGroup.from_log_group_name(
                    self, f"{construct_id}LogGroup{index}", log_group_name
                ),
                filter_pattern=metric.filter_pattern,
                metric_namespace=NAMESPACE,
                metric_name=metric.metric_name,
                # Every counted event carries `count`: 1 per execution from the worker,
                # the batch size from the reclaimer's per-iteration `reclaimed` line.
                metric_value="$.count",
            )
        alarm = cloudwatch.Alarm(
            self,
            f"{construct_id}Alarm",
            alarm_description=description,
            metric=cloudwatch.Metric(
                namespace=NAMESPACE,
                metric_name=metric.metric_name,
                statistic=cloudwatch.Stats.SUM,
                period=Duration.minutes(5),
            ),
            threshold=threshold,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        alarm.add_alarm_action(self._action)
        return alarm

    def _lambda_errors_alarm(self, logical_id: str, function_name: str) -> cloudwatch.Alarm:
        alarm = cloudwatch.Alarm(
            self,
            f"{logical_id}ErrorsAlarm",
            alarm_description=f"Unhandled errors in the {logical_id} Lambda function.",
            metric=cloudwatch.Metric(
                namespace="AWS/Lambda",
                metric_name="Errors",
                dimensions_map={"FunctionName": function_name},
                statistic=cloudwatch.Stats.SUM,
                period=Duration.minutes(5),
            ),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        alarm.add_alarm_action(self._action)
        return alarm
