"""Deployment settings of the stack, read once from CDK context (``-c key=value``/cdk.json).

Everything has a default, so ``cdk synth`` works with no context at all. The two secret ARNs
are optional: when unset, the stack creates empty secrets whose values an operator puts with
``aws secretsmanager put-secret-value`` (see docs/how-to/deploy.md).

A *profile* sets three choices at once, each of which may also be given on its own:

``full`` (the default)
    the worker runs twice, as the Fargate service and as the long-poll ``run_worker``
    Lambda; the Fargate task has a public IP in a public subnet; the three scheduler Lambdas
    loop at their sub-second intervals for about 65 s of every minute.
``lean``
    the worker runs once, as the long-poll Lambda (no VPC, no container, no public IP),
    which also runs the delayed promoter and the cron materializer at their sub-second
    intervals while it claims; the scheduler Lambdas make one pass per minute, looking 75 s
    ahead, instead of looping.

Each scheduled function's timeout and settings overrides come from ``chalicelib/profiles.py``
(:meth:`DeploymentConfig.scheduled_functions`), the table the local stack (``make run
PROFILE=lean``) runs too.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from constructs import Node

REPO_ROOT = Path(__file__).resolve().parents[2]

# chalicelib/profiles.py imports nothing but the standard library. The repository root is on
# sys.path only while it is imported: Chalice's packaging later imports the deployed
# project's app.py, which an earlier root on the path must not shadow.
sys.path.insert(0, str(REPO_ROOT))
try:
    from chalicelib.profiles import ScheduledFunction, deployment_functions
finally:
    sys.path.remove(str(REPO_ROOT))

# The values CloudWatch Logs accepts for RetentionInDays.
VALID_RETENTION_DAYS = frozenset(
    {
        1,
        3,
        5,
        7,
        14,
        30,
        60,
        90,
        120,
        150,
        180,
        365,
        400,
        545,
        731,
        1096,
        1827,
        2192,
        2557,
        2922,
        3288,
        3653,
    }
)


PROFILES = ("full", "lean")
WORKER_MODES = ("both", "fargate", "lambda")


@dataclass(frozen=True)
class Profile:
    """What a profile chooses when the context does not say otherwise."""

    worker: str
    worker_public_ip: bool
    scheduler_loop: bool


PROFILE_DEFAULTS = {
    "full": Profile(worker="both", worker_public_ip=True, scheduler_loop=True),
    "lean": Profile(worker="lambda", worker_public_ip=False, scheduler_loop=False),
}


@dataclass(frozen=True, kw_only=True)
class DeploymentConfig:
    """What may differ between deployments of the same code."""

    # The Chalice project that becomes the Lambda functions.
    source_dir: Path = REPO_ROOT
    # The build context of the worker image (holds infra/worker.Dockerfile).
    worker_image_dir: Path = REPO_ROOT
    stage: str = "dev"
    database_url_secret_arn: str | None = None
    encryption_key_secret_arn: str | None = None
    log_retention_days: int = 30
    worker_desired_count: int = 1
    worker_max_concurrent: int = 50
    # API Gateway usage plan: requests per second per API key (burst 2x), all containers.
    rate_limit_per_sec: float = 50.0
    # Clients that get an API Gateway key of their own (besides the plan's default key).
    api_clients: list[str] = field(default_factory=list)
    te_region: str = "default"
    failed_executions_threshold: int = 5
    reclaimed_executions_threshold: int = 1
    alarm_email: str | None = None
    # full or lean (see the module docstring); the three keys below default to its choice.
    profile: str = "full"
    # Where the worker runs: both (Fargate service and run_worker Lambda), fargate, lambda.
    worker: str | None = None
    # The Fargate task gets a public IP in a public subnet (True), or runs in a private
    # subnet behind one NAT gateway (False). Only meaningful when the worker runs on Fargate.
    worker_public_ip: bool | None = None
    # The scheduler Lambdas loop at their sub-second intervals for most of each minute
    # (True), or make one pass per invocation with a look-ahead of a minute (False).
    scheduler_loop: bool | None = None

    def __post_init__(self) -> None:
        if self.profile not in PROFILES:
            raise ValueError(f"profile={self.profile!r}: pick one of {', '.join(PROFILES)}")
        defaults = PROFILE_DEFAULTS[self.profile]
        for key in ("worker", "worker_public_ip", "scheduler_loop"):
            if getattr(self, key) is None:
                object.__setattr__(self, key, getattr(defaults, key))
        if self.worker not in WORKER_MODES:
            raise ValueError(f"worker={self.worker!r}: pick one of {', '.join(WORKER_MODES)}")
        if self.rate_limit_per_sec <= 0:
            raise ValueError("rate_limit_per_sec must be positive (the usage plan's rate)")
        if self.log_retention_days not in VALID_RETENTION_DAYS:
            raise ValueError(
                f"log_retention_days={self.log_retention_days} is not a CloudWatch Logs "
                f"retention; pick one of {sorted(VALID_RETENTION_DAYS)}"
            )
        if not (self.source_dir / "app.py").is_file():
            raise ValueError(f"source_dir {self.source_dir} has no app.py (a Chalice project)")
        if not (self.worker_image_dir / "infra" / "worker.Dockerfile").is_file():
            raise ValueError(
                f"worker_image_dir {self.worker_image_dir} has no infra/worker.Dockerfile"
            )

    @property
    def fargate_worker(self) -> bool:
        """The worker runs as the Fargate service."""
        return self.worker in ("both", "fargate")

    @property
    def lambda_worker(self) -> bool:
        """The worker runs as the scheduled long-poll ``run_worker`` Lambda."""
        return self.worker in ("both", "lambda")

    def scheduled_functions(self) -> dict[str, ScheduledFunction]:
        """Each scheduled function (deployed or not) with its timeout and settings overrides,
        as the scheduler and worker choices of this deployment set them."""
        return deployment_functions(
            scheduler_loop=bool(self.scheduler_loop),
            lone_worker=self.lambda_worker and not self.fargate_worker,
        )

    @classmethod
    def from_context(cls, node: Node) -> DeploymentConfig:
        """Build the config from the CDK context of ``node`` (unset keys keep defaults)."""

        def get(key: str) -> Any:
            value = node.try_get_context(key)
            return None if value in (None, "") else value

        values: dict[str, Any] = {}
        converters: dict[str, Any] = {
            "source_dir": lambda v: Path(v).resolve(),
            "worker_image_dir": lambda v: Path(v).resolve(),
            **dict.fromkeys(
                (
                    "stage",
                    "database_url_secret_arn",
                    "encryption_key_secret_arn",
                    "te_region",
                    "alarm_email",
                    "profile",
                    "worker",
                ),
                str,
            ),
            **dict.fromkeys(
                (
                    "log_retention_days",
                    "worker_desired_count",
                    "worker_max_concurrent",
                    "failed_executions_threshold",
                    "reclaimed_executions_threshold",
                ),
                int,
            ),
            "rate_limit_per_sec": float,
            "api_clients": _names,
            "worker_public_ip": lambda v: _flag("worker_public_ip", v),
            "scheduler_loop": lambda v: _flag("scheduler_loop", v),
        }
        for key, convert in converters.items():
            if (value := get(key)) is not None:
                values[key] = convert(value)
        return cls(**values)


def _flag(key: str, value: Any) -> bool:
    """A boolean context value: JSON true/false (cdk.json) or a string (``-c key=true``)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ValueError(f"{key}={value!r}: use true or false")


def _names(value: Any) -> list[str]:
    """``api_clients`` as a JSON list (cdk.json) or a comma-separated string (``-c``)."""
    items = value if isinstance(value, list) else str(value).split(",")
    return [str(item).strip() for item in items if str(item).strip()]
