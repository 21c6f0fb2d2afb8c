"""The Task Executor stack: the Chalice app, the Fargate worker, secrets and alarms.

The construct id of the stack is the Chalice stage (``chalice.cdk.Chalice`` takes its stage
from its scope), so ``.chalice/config.json``'s stage settings (memory, the API's timeout)
apply; each scheduled function's timeout and settings overrides are the deployment's
(``chalicelib/profiles.py`` through ``stacks.config``: the ``lean`` profile's short
scheduler invocations, the lone worker Lambda's budget and the scheduler loops it hosts),
and every process gets ``TE_PROFILE``. The CloudFormation stack name is
``task-executor-<stage>``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import CfnOutput, Stack, Tags
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from chalice.cdk import Chalice
from constructs import Construct

from stacks.api_errors import gateway_responses
from stacks.config import DeploymentConfig
from stacks.observability import (
    AUTO_PAUSED_EVENT,
    FAILED_EVENT,
    RECLAIMED_EVENT,
    EventMetric,
    Observability,
)
from stacks.packaging import slim_deployment_zip
from stacks.secrets import AppSecrets
from stacks.usage_plans import (
    API_LOGICAL_ID,
    ClientKeys,
    exempt_from_api_keys,
    require_api_keys,
)
from stacks.worker_service import WorkerService, set_retention

# The app's Lambda entry points (chalice function name -> CloudFormation logical id).
API_FUNCTION = "APIHandler"
SCHEDULED_FUNCTIONS = {
    "materialize_cron_ticks": "MaterializeCronTicks",
    "promote_delayed_executions": "PromoteDelayedExecutions",
    "reclaim_stuck_executions": "ReclaimStuckExecutions",
    "run_worker": "RunWorker",
}
LAMBDA_FUNCTIONS = [API_FUNCTION, *SCHEDULED_FUNCTIONS.values()]
RUN_WORKER = SCHEDULED_FUNCTIONS["run_worker"]

# The lone worker Lambda of the lean profile at half the memory (its RSS is ~40 MB). Its
# timeout and every scheduled function's, and their settings overrides, are
# chalicelib/profiles.py's (DeploymentConfig.scheduled_functions).
LEAN_WORKER_MEMORY_MB = 512


class SlimChalice(Chalice):
    """Chalice's CDK construct, deploying the slimmed package.

    The construct packages the app (``_package_app``) and only then builds its template's
    assets from ``deployment.zip``; slimming in between is the one hook it has (private in
    chalice 1.34.0, which requirements-run.txt pins; tests/infra checks the asset).
    """

    def _package_app(self) -> None:
        super()._package_app()
        slim_deployment_zip(Path(self._sam_package_dir) / "deployment.zip")


class TaskExecutorStack(Stack):
    """Everything one stage of Task Executor needs in one AWS account and region."""

    def __init__(self, scope: Construct, config: DeploymentConfig, **kwargs: Any) -> None:
        super().__init__(scope, config.stage, stack_name=f"task-executor-{config.stage}", **kwargs)
        Tags.of(self).add("app", "task-executor")
        Tags.of(self).add("stage", config.stage)
        self.config = config

        self.secrets = AppSecrets(
            self,
            "Secrets",
            stack_name=self.stack_name,
            database_url_secret_arn=config.database_url_secret_arn,
            encryption_key_secret_arn=config.encryption_key_secret_arn,
        )
        self.chalice = SlimChalice(
            self,
            "TaskExecutor",
            source_dir=str(config.source_dir),
        )
        self.functions = [f for f in LAMBDA_FUNCTIONS if f != RUN_WORKER or config.lambda_worker]
        if not config.lambda_worker:
            # The worker runs on Fargate only: the app's run_worker entry point is left out
            # of the template rather than deployed unscheduled.
            self.chalice.sam_template.node.try_remove_child(RUN_WORKER)
        self._apply_profile()
        self.lambda_log_groups = self._lambda_log_groups()
        self._configure_lambda_environment()
        self._restrict_lambda_role()
        rest_api = self.chalice.get_resource(API_LOGICAL_ID)
        rest_api.add_property_override(
            "DefinitionBody.x-amazon-apigateway-gateway-responses", gateway_responses()
        )
        # Per-key rate limits across every Lambda container: API Gateway's usage plan.
        require_api_keys(
            rest_api,
            rate_per_sec=config.rate_limit_per_sec,
            description=f"task-executor-{config.stage}: per-client throttle",
        )
        exempt_from_api_keys(rest_api)  # the dashboard's page: a browser sends no x-api-key
        self.client_keys = ClientKeys(
            self, "ApiClients", clients=config.api_clients, prefix=self.stack_name
        )

        self.worker: WorkerService | None = None
        if config.fargate_worker:
            self.worker = WorkerService(
                self,
                "Worker",
                image_dir=config.worker_image_dir,
                database_url=self.secrets.database_url,
                encryption_key=self.secrets.encryption_key,
                environment={
                    **self._common_environment(),
                    "TE_WORKER_MAX_CONCURRENT": str(config.worker_max_concurrent),
                },
                desired_count=config.worker_desired_count,
                log_retention_days=config.log_retention_days,
                public_ip=bool(config.worker_public_ip),
            )
        self.observability = self._observability()
        self._outputs()

    def _apply_profile(self) -> None:
        """Timeouts, memory and settings overrides of the scheduled functions deployed."""
        for name, function in self.config.scheduled_functions().items():
            logical_id = SCHEDULED_FUNCTIONS[name]
            if logical_id not in self.functions:
                continue
            resource = self.chalice.get_resource(logical_id)
            resource.add_property_override("Timeout", function.timeout_sec)
            for key, value in function.env.items():
                self.chalice.add_environment_variable(key, value, logical_id)
        lone_worker = self.config.lambda_worker and not self.config.fargate_worker
        if lone_worker and self.config.profile == "lean":
            self.chalice.get_resource(RUN_WORKER).add_property_override(
                "MemorySize", LEAN_WORKER_MEMORY_MB
            )

    def _lambda_log_groups(self) -> dict[str, logs.LogGroup]:
        """One log group per function, with retention, owned by the stack.

        Not Chalice's ``log_retention_in_days``: chalice 1.34 names the API handler's log
        group after ``ApiHandler`` while the function's logical id is ``APIHandler``, which
        breaks the template.
        """
        groups: dict[str, logs.LogGroup] = {}
        for logical_id in self.functions:
            function_name = self.chalice.get_resource(logical_id).ref
            group = logs.LogGroup(
                self, f"{logical_id}Logs", log_group_name=f"/aws/lambda/{function_name}"
            )
            set_retention(group, self.config.log_retention_days)
            groups[logical_id] = group
        return groups

    def _common_environment(self) -> dict[str, str]:
        """Plain settings shared by every process (no secret values here)."""
        return {
            "TE_LOG_FORMAT": "json",
            # CockroachDB has open issues with SKIP LOCKED under load
            # (docs/explanation/design.md, database rules).
            "TE_CLAIM_STRATEGY": "conditional_update",
            "TE_REGION": self.config.te_region,
            "TE_PROFILE": self.config.profile,
        }

    def _configure_lambda_environment(self) -> None:
        """Lambdas get the secrets' ARNs; the app reads the values at cold start."""
        common = {
            **self._common_environment(),
            "TE_DATABASE_URL_SECRET_ARN": self.secrets.database_url.secret_arn,
            "TE_SECRET_ENCRYPTION_KEY_SECRET_ARN": self.secrets.encryption_key.secret_arn,
        }
        for logical_id in self.functions:
            for key, value in common.items():
                self.chalice.add_environment_variable(key, value, logical_id)
        # The in-process limiter is per container: off here, the usage plan limits per key.
        self.chalice.add_environment_variable("TE_RATE_LIMIT_PER_SEC", "0", API_FUNCTION)
        if self.config.lambda_worker:
            self.chalice.add_environment_variable(
                "TE_WORKER_MAX_CONCURRENT", str(self.config.worker_max_concurrent), RUN_WORKER
            )

    def _restrict_lambda_role(self) -> None:
        """Replace Chalice's generated policy (``logs:*`` on every log group) by exact grants.

        Secrets: GetSecretValue on the two secrets, inline in the role so a function never
        runs without it. Logs: CreateLogStream/PutLogEvents on each function's own log group
        only, in a separate policy because the log group names come from the functions
        (inline they would form a cycle). No CreateLogGroup: the stack owns the log groups,
        with retention, and a Lambda-created group would make that resource fail to create.
        """
        role = self.chalice.get_resource("DefaultRole")
        secrets_document = iam.PolicyDocument(
            statements=[
                iam.PolicyStatement(
                    actions=["secretsmanager:GetSecretValue"],
                    resources=[
                        self.secrets.database_url.secret_arn,
                        self.secrets.encryption_key.secret_arn,
                    ],
                )
            ]
        )
        role.add_property_override(
            "Policies",
            [{"PolicyName": "ReadServiceSecrets", "PolicyDocument": secrets_document}],
        )
        log_group_arns = [group.log_group_arn for group in self.lambda_log_groups.values()]
        iam.CfnPolicy(
            self,
            "LambdaLogsPolicy",
            policy_name="WriteOwnLogGroups",
            roles=[role.ref],
            policy_document=iam.PolicyDocument(
                statements=[
                    iam.PolicyStatement(
                        actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                        resources=log_group_arns,
                    )
                ]
            ),
        )

    def _observability(self) -> Observability:
        def lambda_log_group(logical_id: str) -> str:
            return self.lambda_log_groups[logical_id].log_group_name

        # Every log group an execution_failed line can come from: the workers, the reclaimer.
        failed_sources = [lambda_log_group(SCHEDULED_FUNCTIONS["reclaim_stuck_executions"])]
        if self.config.lambda_worker:
            failed_sources.insert(0, lambda_log_group(RUN_WORKER))
        if self.worker is not None:
            failed_sources.append(self.worker.log_group.log_group_name)
        return Observability(
            self,
            "Alarms",
            failed=EventMetric(
                event=FAILED_EVENT,
                metric_name="ExecutionsFailed",
                log_group_names=failed_sources,
            ),
            # A 410 pauses in the worker's finalize, FAILING in the housekeeper (beside the
            # reclaimer): the same log groups as execution_failed.
            auto_paused=EventMetric(
                event=AUTO_PAUSED_EVENT,
                metric_name="EndpointsAutoPaused",
                log_group_names=failed_sources,
            ),
            reclaimed=EventMetric(
                event=RECLAIMED_EVENT,
                metric_name="ExecutionsReclaimed",
                log_group_names=[lambda_log_group(SCHEDULED_FUNCTIONS["reclaim_stuck_executions"])],
            ),
            failed_threshold=self.config.failed_executions_threshold,
            reclaimed_threshold=self.config.reclaimed_executions_threshold,
            # The housekeeper, which logs queue_health, runs beside the reclaimer.
            queue_health_log_group_name=lambda_log_group(
                SCHEDULED_FUNCTIONS["reclaim_stuck_executions"]
            ),
            lambda_function_names={
                logical_id: self.chalice.get_resource(logical_id).ref
                for logical_id in self.functions
            },
            alarm_email=self.config.alarm_email,
            # Every function EventBridge invokes each minute: an alarm when it no longer is.
            scheduled_function_names={
                logical_id: self.chalice.get_resource(logical_id).ref
                for logical_id in self.functions
                if logical_id != API_FUNCTION
            },
        )

    def _outputs(self) -> None:
        CfnOutput(self, "DatabaseUrlSecretArn", value=self.secrets.database_url.secret_arn)
        CfnOutput(self, "EncryptionKeySecretArn", value=self.secrets.encryption_key.secret_arn)
        if self.worker is not None:
            CfnOutput(self, "WorkerClusterName", value=self.worker.cluster.cluster_name)
            CfnOutput(self, "WorkerServiceName", value=self.worker.service.service_name)
        CfnOutput(self, "AlarmTopicArn", value=self.observability.topic.topic_arn)
