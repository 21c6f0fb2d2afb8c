"""Metric filters and alarms over the services' JSON log lines.

The app logs one JSON object per line (``TE_LOG_FORMAT=json``) with the event name in
``event`` (``chalicelib.logs.log_event``). Two events matter to an operator:

``execution_failed``
    an execution reached FAILED (retries exhausted, or its lease expired with no attempts
    left). Logged by the worker (Lambda and Fargate) and by the reclaimer.
``reclaimed``
    the reclaimer returned one execution whose lease expired to RETRYING or FAILED: a
    worker died or overran its lease.
``endpoint_auto_paused``
    an endpoint paused itself: a delivery answered 410 Gone (the worker) or every attempt
    failed for longer than its ``auto_pause_after_ms`` (the housekeeper, beside the
    reclaimer). Its work waits until someone resumes it: ``EndpointsAutoPaused`` alarms at
    the first (the Prometheus rule ``TaskExecutorEndpointAutoPaused`` says the same).

Each becomes a CloudWatch metric in the ``TaskExecutor`` namespace (one data point per log
line) with an alarm that notifies an SNS topic. Lambda ``Errors`` (an unhandled exception
in an entry point) get one alarm per function.

``queue_health``
    the deployment's figures, logged once a minute by the housekeeper (in the
    ``reclaim_stuck_executions`` function): ``oldest_due_lag_seconds``, the delivery
    ``attempts`` and ``failed_attempts`` of the last complete minute, and how many worker
    and scheduler processes have a fresh heartbeat (``live_workers``, ``live_schedulers``;
    ``chalicelib.scheduler.queue_health``). Each field becomes a metric, and the alarms
    read them per minute, taking each minute's Maximum (overlapping invocations may log a
    minute twice): ``QueueLag`` when the lag stays above :data:`LAG_THRESHOLD_SEC` for
    :data:`LAG_MINUTES` minutes, ``DeliveryFailureRate`` (metric math: failed / attempts)
    when more than :data:`FAILURE_RATE_PERCENT` % of the attempts fail for
    :data:`FAILURE_RATE_MINUTES` minutes, in minutes of at least
    :data:`FAILURE_RATE_MIN_ATTEMPTS` attempts.

A stopped process. The Prometheus rules read ``te_live_processes{kind}``; here:

``WorkerStopped``
    ``LiveWorkers`` below 1 in each of :data:`WORKER_STOPPED_MINUTES` minutes in a row (a
    Fargate task killed, the worker Lambda no longer invoked or failing at start). A
    minute without a line is not breaching: no line means the housekeeper's scheduler
    is down, which is ``SchedulerStopped``'s alarm, and the line is what says whether a
    worker runs.
``SchedulerStopped``
    the scheduler that logs the line cannot report its own death: the alarm reads
    ``LiveSchedulers`` below 1 with missing data *breaching*, in each of
    :data:`SCHEDULER_STOPPED_MINUTES` minutes in a row, so the line missing is the alarm
    (a scheduler invocation's timing may leave one minute without a line; three in a row
    are not chance).
``<Function>NotInvoked``
    per function EventBridge invokes on its schedule (each scheduler function and the
    worker Lambda): Lambda's own ``Invocations`` below 1 in each of
    :data:`SCHEDULER_STOPPED_MINUTES` minutes in a row, missing data (Lambda publishes
    nothing for a minute without an invocation) breaching. The cron materializer or the
    delayed promoter can stop alone (its rule disabled, its concurrency at 0) while the
    housekeeper still logs: only these alarms see that.

``QueueLag`` keeps missing data not breaching: its lag counts the cron ticks and DELAYED
runs a stopped scheduler leaves behind, but with the housekeeper's function stopped there
is no lag to read, and ``SchedulerStopped`` is the alarm that says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
AUTO_PAUSED_EVENT = "endpoint_auto_paused"
QUEUE_HEALTH_EVENT = "queue_health"
#: queue_health's fields -> the metrics they become.
QUEUE_HEALTH_METRICS = {
    "oldest_due_lag_seconds": "OldestDueLagSeconds",
    "attempts": "DeliveryAttempts",
    "failed_attempts": "DeliveryAttemptsFailed",
    "live_workers": "LiveWorkers",
    "live_schedulers": "LiveSchedulers",
}
# A healthy worker claims due work within its poll interval, so the lag stays at seconds;
# one-pass scheduler functions with no worker Lambda to run the promoter (lean with
# worker=fargate) add at most a minute to a DELAYED run they promote late.
# Twice that, for 5 minutes running (the oldest then at least 7 minutes late): the workers
# are down or saturated, or an endpoint's flow control admits less than arrives. The
# Prometheus rule (docs/alerts/prometheus-rules.yml) holds per endpoint the same 120 s.
LAG_THRESHOLD_SEC = 120
LAG_MINUTES = 5
# Retries absorb a failure now and then; a fifth of all attempts failing for 5 minutes
# running is a target down or refusing. Minutes of fewer than 5 attempts count as not
# failing (one of one is 100%): a quiet deployment's failures reach ExecutionsFailed.
FAILURE_RATE_PERCENT = 20
FAILURE_RATE_MINUTES = 5
FAILURE_RATE_MIN_ATTEMPTS = 5
# A killed worker reads 0 within 15 s of its last beat (a Lambda worker's last beat counts
# until its next invocation is due). 2 minutes leaves room for ECS replacing a stopped task
# and is the Prometheus rule's `for: 2m` (TaskExecutorWorkerDown).
WORKER_STOPPED_MINUTES = 2
# Scheduled invocations jitter by seconds: a minute may pass without a queue_health line or
# an invocation and the next have two. Three minutes in a row without one is a stop.
SCHEDULER_STOPPED_MINUTES = 3


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
    """SNS topic, event metrics + alarms, queue_health alarms, and per-function Lambda
    alarms (errors; a scheduled function no longer invoked)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        failed: EventMetric,
        auto_paused: EventMetric,
        reclaimed: EventMetric,
        failed_threshold: int,
        reclaimed_threshold: int,
        queue_health_log_group_name: str,
        lambda_function_names: dict[str, str],
        alarm_email: str | None,
        scheduled_function_names: Mapping[str, str] | None = None,
    ) -> None:
        """``lambda_function_names``: every function (logical id -> name), for the Errors
        alarms; ``scheduled_function_names``: those EventBridge invokes on a schedule, for
        the NotInvoked alarms."""
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
        self.auto_paused_alarm = self._event_alarm(
            "EndpointsAutoPaused",
            auto_paused,
            1,
            "An endpoint paused itself (410 Gone, or failing for longer than its "
            "auto_pause_after_ms): its work waits until it is resumed.",
        )
        figures = self._queue_health_metrics(queue_health_log_group_name)
        self.lag_alarm = self._alarm(
            "QueueLag",
            f"Due executions have waited more than {LAG_THRESHOLD_SEC} s past their run_at "
            f"for {LAG_MINUTES} minutes (paused endpoints left out).",
            figures["oldest_due_lag_seconds"],
            threshold=LAG_THRESHOLD_SEC,
            minutes=LAG_MINUTES,
        )
        attempts, failed = figures["attempts"], figures["failed_attempts"]
        self.failure_rate_alarm = self._alarm(
            "DeliveryFailureRate",
            f"More than {FAILURE_RATE_PERCENT} % of the delivery attempts failed, "
            f"{FAILURE_RATE_MINUTES} minutes running (minutes of fewer than "
            f"{FAILURE_RATE_MIN_ATTEMPTS} attempts count as not failing).",
            cloudwatch.MathExpression(
                expression=(
                    f"IF(attempts >= {FAILURE_RATE_MIN_ATTEMPTS}, 100 * failed / attempts, 0)"
                ),
                using_metrics={"attempts": attempts, "failed": failed},
                label="Failed delivery attempts (%)",
                period=Duration.minutes(1),
            ),
            threshold=FAILURE_RATE_PERCENT,
            minutes=FAILURE_RATE_MINUTES,
        )
        self.worker_stopped_alarm = self._alarm(
            "WorkerStopped",
            f"No worker process has had a fresh heartbeat for {WORKER_STOPPED_MINUTES} "
            "minutes (queue_health's live_workers): due executions wait unclaimed.",
            figures["live_workers"],
            threshold=1,
            minutes=WORKER_STOPPED_MINUTES,
            comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
        )
        self.scheduler_stopped_alarm = self._alarm(
            "SchedulerStopped",
            f"No queue_health line (or one with no live scheduler) for "
            f"{SCHEDULER_STOPPED_MINUTES} minutes: the housekeeper's scheduler function has "
            "stopped; DELAYED runs, cron ticks and lost executions may wait too.",
            figures["live_schedulers"],
            threshold=1,
            minutes=SCHEDULER_STOPPED_MINUTES,
            comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            missing=cloudwatch.TreatMissingData.BREACHING,
        )
        self.lambda_error_alarms = [
            self._lambda_errors_alarm(logical_id, function_name)
            for logical_id, function_name in lambda_function_names.items()
        ]
        self.not_invoked_alarms = [
            self._not_invoked_alarm(logical_id, function_name)
            for logical_id, function_name in (scheduled_function_names or {}).items()
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

    def _queue_health_metrics(self, log_group_name: str) -> dict[str, cloudwatch.Metric]:
        """One metric filter per queue_health field; the metrics as each minute's Maximum."""
        log_group = logs.LogGroup.from_log_group_name(self, "QueueHealthLogGroup", log_group_name)
        metrics = {}
        for field, metric_name in QUEUE_HEALTH_METRICS.items():
            logs.MetricFilter(
                self,
                f"{metric_name}Filter",
                log_group=log_group,
                filter_pattern=logs.FilterPattern.string_value("$.event", "=", QUEUE_HEALTH_EVENT),
                metric_namespace=NAMESPACE,
                metric_name=metric_name,
                metric_value=f"$.{field}",
            )
            metrics[field] = cloudwatch.Metric(
                namespace=NAMESPACE,
                metric_name=metric_name,
                statistic=cloudwatch.Stats.MAXIMUM,
                period=Duration.minutes(1),
            )
        return metrics

    def _alarm(
        self,
        construct_id: str,
        description: str,
        metric: cloudwatch.IMetric,
        *,
        threshold: float,
        minutes: int,
        comparison: cloudwatch.ComparisonOperator = (
            cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD
        ),
        missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
    ) -> cloudwatch.Alarm:
        """Above (or as ``comparison`` says) ``threshold`` in each of ``minutes`` minutes in
        a row; by default a minute without data (no scheduler logging: SchedulerStopped's
        business) is not breaching."""
        alarm = cloudwatch.Alarm(
            self,
            f"{construct_id}Alarm",
            alarm_description=description,
            metric=metric,
            threshold=threshold,
            evaluation_periods=minutes,
            datapoints_to_alarm=minutes,
            comparison_operator=comparison,
            treat_missing_data=missing,
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

    def _not_invoked_alarm(self, logical_id: str, function_name: str) -> cloudwatch.Alarm:
        """No invocation of a scheduled function in each of SCHEDULER_STOPPED_MINUTES
        minutes (no data is no invocation: breaching)."""
        return self._alarm(
            f"{logical_id}NotInvoked",
            f"The {logical_id} Lambda function has not been invoked for "
            f"{SCHEDULER_STOPPED_MINUTES} minutes: its EventBridge schedule no longer runs "
            "it (rule disabled or deleted, concurrency at 0).",
            cloudwatch.Metric(
                namespace="AWS/Lambda",
                metric_name="Invocations",
                dimensions_map={"FunctionName": function_name},
                statistic=cloudwatch.Stats.SUM,
                period=Duration.minutes(1),
            ),
            threshold=1,
            minutes=SCHEDULER_STOPPED_MINUTES,
            comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            missing=cloudwatch.TreatMissingData.BREACHING,
        )
