"""The worker as a long-lived Fargate service (``python -m chalicelib.worker``).

The same worker loop can also run as the scheduled ``run_worker`` Lambda (the ``full``
profile runs both); both claim with leases, so running them side by side is safe. The
task needs no AWS API at run time: the database URL and the encryption key reach it
through ECS ``secrets`` (resolved by the task *execution* role when the task starts), never
as plain environment values.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Duration, IgnoreMode
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

# The image's build context is the repository root; only what the Dockerfile copies goes
# in (Docker ignore syntax), which also keeps the staged asset in cdk.out small.
BUILD_CONTEXT_EXCLUDES = [
    "*",
    "!app.py",
    "!requirements.txt",
    "!chalicelib",
    "!migrations",
    "!infra/worker.Dockerfile",
    "**/__pycache__",
    "**/*.pyc",
]


class WorkerService(Construct):
    """VPC, cluster, task definition and service for the worker.

    With ``public_ip`` the task runs in a public subnet with a public IP (no NAT gateway:
    the cheaper network); without it, in a private subnet whose traffic leaves through one
    NAT gateway, so the task has no address reachable from the internet.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        image_dir: Path,
        database_url: secretsmanager.ISecret,
        encryption_key: secretsmanager.ISecret,
        environment: dict[str, str],
        desired_count: int,
        log_retention_days: int,
        public_ip: bool,
    ) -> None:
        super().__init__(scope, construct_id)
        # The worker reaches CockroachDB (TLS), Kafka, Redis and HTTP targets on the
        # internet, and ECR and Secrets Manager when a task starts. No inbound rules.
        # Public subnets only when the task has a public IP; otherwise private subnets and
        # one NAT gateway (in the first zone's public subnet) for both zones.
        subnets = [ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC)]
        if not public_ip:
            subnets.append(
                ec2.SubnetConfiguration(
                    name="private", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS
                )
            )
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            max_azs=2,
            nat_gateways=0 if public_ip else 1,
            subnet_configuration=subnets,
            # Nothing uses the default security group; restricting it would deploy an
            # extra custom-resource Lambda for no gain.
            restrict_default_security_group=False,
        )
        self.cluster = ecs.Cluster(self, "Cluster", vpc=self.vpc)

        self.log_group = logs.LogGroup(self, "Logs")
        set_retention(self.log_group, log_retention_days)

        self.task_definition = ecs.FargateTaskDefinition(
            self,
            "Task",
            cpu=512,
            memory_limit_mib=1024,
            runtime_platform=ecs.RuntimePlatform(
                cpu_architecture=ecs.CpuArchitecture.X86_64,
                operating_system_family=ecs.OperatingSystemFamily.LINUX,
            ),
        )
        self.container = self.task_definition.add_container(
            "worker",
            image=ecs.ContainerImage.from_asset(
                str(image_dir),
                file="infra/worker.Dockerfile",
                target="worker",  # not deploy-tools (the Chalice CLI, for LocalStack only)
                exclude=BUILD_CONTEXT_EXCLUDES,
                ignore_mode=IgnoreMode.DOCKER,
                platform=ecr_assets.Platform.LINUX_AMD64,
            ),
            command=["python", "-m", "chalicelib.worker"],
            environment=environment,
            secrets={
                "TE_DATABASE_URL": ecs.Secret.from_secrets_manager(database_url),
                "TE_SECRET_ENCRYPTION_KEY": ecs.Secret.from_secrets_manager(encryption_key),
            },
            logging=ecs.LogDrivers.aws_logs(stream_prefix="worker", log_group=self.log_group),
            # SIGTERM first: the worker stops claiming and finishes in-flight deliveries
            # within TE_WORKER_SHUTDOWN_TIMEOUT_SEC (30 s by default).
            stop_timeout=Duration.seconds(45),
        )
        self.service = ecs.FargateService(
            self,
            "Service",
            cluster=self.cluster,
            task_definition=self.task_definition,
            desired_count=desired_count,
            assign_public_ip=public_ip,
            vpc_subnets=ec2.SubnetSelection(
                subnet_type=(
                    ec2.SubnetType.PUBLIC if public_ip else ec2.SubnetType.PRIVATE_WITH_EGRESS
                )
            ),
            circuit_breaker=ecs.DeploymentCircuitBreaker(rollback=True),
            min_healthy_percent=100,
            max_healthy_percent=200,
        )


def set_retention(log_group: logs.LogGroup, days: int) -> None:
    """Set any CloudWatch-valid retention (the L2 enum has no constructor from days)."""
    cfn = log_group.node.default_child
    assert isinstance(cfn, logs.CfnLogGroup)
    cfn.retention_in_days = days
