"""CDK entry point: ``cdk synth`` / ``cdk deploy`` from this directory, or ``make synth``
(``infra/synth.py``) from the repository root; see docs/how-to/deploy.md.

Not named ``app.py``: Chalice packaging imports the project's ``app`` module, and the CDK
entry must not shadow it. The stack's account and region are left unset (environment
agnostic), so synthesis needs no AWS credentials; ``cdk deploy`` takes them from the CLI.
Chalice's packaging still wants a region to build its AWS client: without
``AWS_DEFAULT_REGION``/``AWS_REGION`` it gets the CDK CLI's ``CDK_DEFAULT_REGION``, else
``us-east-1`` (the template is the same whatever the region).

Context (``-c key=value`` or cdk.json): ``profile`` (``full`` or ``lean``), ``worker``
(``both``, ``fargate``, ``lambda``), ``worker_public_ip``, ``scheduler_loop``, ``stage``,
``source_dir``, ``worker_image_dir``, ``database_url_secret_arn``,
``encryption_key_secret_arn``, ``log_retention_days``, ``worker_desired_count``,
``worker_max_concurrent``, ``rate_limit_per_sec`` (API Gateway usage plan, per key),
``api_clients`` (names that get their own API key), ``te_region``,
``failed_executions_threshold``, ``reclaimed_executions_threshold``, ``alarm_email``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from aws_cdk import App

# `python3 infra/cdk_app.py` and `cdk synth` (cwd infra/) both find the stacks package.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from stacks.config import DeploymentConfig
from stacks.task_executor import TaskExecutorStack


def main() -> None:
    """Synthesize the stack into ``$CDK_OUTDIR`` (the CDK CLI sets it; else a temp dir)."""
    if not (os.environ.get("AWS_DEFAULT_REGION") or os.environ.get("AWS_REGION")):
        os.environ["AWS_DEFAULT_REGION"] = os.environ.get("CDK_DEFAULT_REGION") or "us-east-1"
    app = App()
    TaskExecutorStack(app, DeploymentConfig.from_context(app.node))
    app.synth()


if __name__ == "__main__":
    main()
