"""Deployment settings of the stack, read once from CDK context (``-c key=value``/cdk.json).

Everything has a default, so ``cdk synth`` works with no context at all. The two secret ARNs
are optional: when unset, the stack creates empty secrets whose values an operator puts with
``aws secretsmanager put-secret-value`` (see docs/deploy.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from constructs import Node

REPO_ROOT = Path(__file__).resolve().parents[2]

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

    def __post_init__(self) -> None:
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

    @classmethod
    def from_context(cls, node: Node) -> DeploymentConfig:
        """Build the config from the CDK context of ``node`` (unset keys keep defaults)."""

        def get(key: str) -> Any:
            value = node.try_get_context(key)
            return None if value in (None, "") else value

        values: dict[str, Any] = {}
        for key in ("source_dir", "worker_image_dir"):
            if (directory := get(key)) is not None:
                values[key] = Path(directory).resolve()
        for key in (
            "stage",
            "database_url_secret_arn",
            "encryption_key_secret_arn",
            "te_region",
            "alarm_email",
        ):
            if (value := get(key)) is not None:
                values[key] = str(value)
        for key in (
            "log_retention_days",
            "worker_desired_count",
            "worker_max_concurrent",
            "failed_executions_threshold",
            "reclaimed_executions_threshold",
        ):
            if (value := get(key)) is not None:
                values[key] = int(value)
        if (rate := get("rate_limit_per_sec")) is not None:
            values["rate_limit_per_sec"] = float(rate)
        if (clients := get("api_clients")) is not None:
            values["api_clients"] = _names(clients)
        return cls(**values)


def _names(value: Any) -> list[str]:
    """``api_clients`` as a JSON list (cdk.json) or a comma-separated string (``-c``)."""
    items = value if isinstance(value, list) else str(value).split(",")
    return [str(item).strip() for item in items if str(item).strip()]
