"""Deploy the Chalice app into LocalStack, the way the AWS stack wires it.

1. Puts the database URL and the encryption key into LocalStack's Secrets Manager.
2. Copies the project to a temporary directory with a ``localstack`` Chalice stage whose
   Lambda environment holds the two secrets' ARNs (never their values) and the other
   ``TE_*`` settings of this process. With ``--profile full|lean``, each function also gets
   the timeout, memory and settings that profile's CloudFormation template gives it (the
   stack is synthesized offline with infra/synth.py, which needs the CDK toolchain of
   ``make venv``); without, ``.chalice/config.json``'s ``dev`` stage applies.
3. Runs ``chalice deploy --stage localstack`` against ``AWS_ENDPOINT_URL``, reusing the
   source's ``.chalice/deployments`` cache of dependency packages when it can.
4. Prints (and with ``--out`` writes as JSON) the API URL and the deployed resources.

The Fargate worker has no LocalStack counterpart here (ECS is not in LocalStack's free
edition); localstack-compose.yml runs the same worker process as its ``worker`` service.
Usage: see docs/how-to/deploy.md, "run against LocalStack" (tests/localstack deploys the
``lean`` profile this way into a LocalStack without Docker).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import botocore.session
from botocore.exceptions import ClientError

STAGE = "localstack"
SECRET_SETTINGS = {
    "TE_DATABASE_URL": "database-url",
    "TE_SECRET_ENCRYPTION_KEY": "secret-encryption-key",
}
PROJECT_FILES = ("app.py", "requirements.txt")
PROJECT_DIRS = ("chalicelib",)
DEFAULT_ENDPOINT = "http://localhost:4566"
# As seen from a Lambda container on the compose network.
DEFAULT_DATABASE_URL = "postgresql://root@cockroachdb:26257/task_executor?sslmode=disable"
CHALICE_CLI = "import sys; from chalice.cli import main; sys.exit(main())"


def put_secret(client: Any, name: str, value: str) -> str:
    """Create the secret, or give the existing one a new value; return its ARN."""
    try:
        return str(client.create_secret(Name=name, SecretString=value)["ARN"])
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "ResourceExistsException":
            raise
    return str(client.put_secret_value(SecretId=name, SecretString=value)["ARN"])


def lambda_environment(env: dict[str, str], secret_arns: dict[str, str]) -> dict[str, str]:
    """``TE_*`` settings for the Lambdas: secret values replaced by ``<NAME>_SECRET_ARN``."""
    plain = {
        key: value
        for key, value in env.items()
        if key.startswith("TE_") and key not in SECRET_SETTINGS and not key.endswith("_ARN")
    }
    plain.setdefault("TE_LOG_FORMAT", "json")
    plain.setdefault("TE_CLAIM_STRATEGY", "conditional_update")
    plain.setdefault("TE_ALLOW_PRIVATE_TARGETS", "true")
    for setting, arn in secret_arns.items():
        plain[f"{setting}_SECRET_ARN"] = arn
    return plain


def chalice_name(handler: str) -> str:
    """The Chalice function a template's ``Handler`` names (``app.app`` is the API's)."""
    return "api_handler" if handler == "app.app" else handler.rsplit(".", 1)[-1]


def profile_functions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Chalice's ``lambda_functions`` settings for what a synthesized template deploys.

    Each function's timeout, memory and plain environment; the secrets' ARNs (references
    to the stack's own secrets there) are this deployment's, set stage-wide.
    """
    functions: dict[str, dict[str, Any]] = {}
    for resource in template["Resources"].values():
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        props = resource["Properties"]
        variables = props.get("Environment", {}).get("Variables", {})
        functions[chalice_name(props["Handler"])] = {
            "lambda_timeout": props["Timeout"],
            "lambda_memory_size": props["MemorySize"],
            "environment_variables": {
                key: value
                for key, value in variables.items()
                if isinstance(value, str) and not key.endswith("_SECRET_ARN")
            },
        }
    return functions


def synthesized_template(profile: str, source_dir: Path) -> dict[str, Any]:
    """The stack's template for ``profile``, synthesized offline (infra/synth.py)."""
    import synth  # beside this script

    with tempfile.TemporaryDirectory(prefix="te-localstack-synth-") as tmp:
        outdir = Path(tmp) / "cdk.out"
        context = {"profile": profile, "source_dir": str(source_dir), "stage": "dev"}
        result = synth.synthesize(outdir, context, capture=True)
        if result.returncode != 0:
            raise RuntimeError(f"synthesis of profile {profile} failed:\n{result.stderr}")
        return dict(json.loads((outdir / "dev.template.json").read_text()))


def chalice_config(
    source_dir: Path,
    environment: dict[str, str],
    functions: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The project's config with a ``localstack`` stage based on its ``dev`` stage.

    ``functions``: per-function settings (a profile's) over the ``dev`` stage's.
    """
    config_path = source_dir / ".chalice" / "config.json"
    config: dict[str, Any] = (
        json.loads(config_path.read_text())
        if config_path.is_file()
        else {"version": "2.0", "app_name": "task-executor", "stages": {}}
    )
    stage = dict(config.get("stages", {}).get("dev", {"api_gateway_stage": "api"}))
    stage["environment_variables"] = {**stage.get("environment_variables", {}), **environment}
    if functions:
        known = dict(stage.get("lambda_functions", {}))
        stage["lambda_functions"] = {
            name: {**known.get(name, {}), **settings} for name, settings in functions.items()
        }
    config.setdefault("stages", {})[STAGE] = stage
    return config


def link_package_cache(source_dir: Path, target: Path) -> None:
    """Share the source's ``.chalice/deployments`` (Chalice's cache of the dependencies'
    package, by requirements and runtime): a deploy then downloads nothing it has built
    before. Skipped when the source is read-only."""
    cache = source_dir / ".chalice" / "deployments"
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError:
        return
    (target / ".chalice" / "deployments").symlink_to(cache, target_is_directory=True)


def copy_project(source_dir: Path, target: Path, config: dict[str, Any]) -> None:
    """Copy what Chalice packages, and write the stage config next to it."""
    for name in PROJECT_FILES:
        if (source_dir / name).is_file():
            shutil.copy2(source_dir / name, target / name)
    for name in PROJECT_DIRS:
        if (source_dir / name).is_dir():
            shutil.copytree(
                source_dir / name, target / name, ignore=shutil.ignore_patterns("__pycache__")
            )
    (target / ".chalice").mkdir()
    (target / ".chalice" / "config.json").write_text(json.dumps(config, indent=2))
    link_package_cache(source_dir, target)


def chalice_deploy(project: Path, endpoint_url: str, env: dict[str, str]) -> dict[str, Any]:
    """Run ``chalice deploy`` against LocalStack; return Chalice's deployed-resources record."""
    deploy_env = {**env, "AWS_ENDPOINT_URL": endpoint_url}
    subprocess.run(  # noqa: S603 - our interpreter, fixed arguments
        [sys.executable, "-c", CHALICE_CLI, "deploy", "--stage", STAGE],
        cwd=project,
        env=deploy_env,
        check=True,
    )
    record = json.loads((project / ".chalice" / "deployed" / f"{STAGE}.json").read_text())
    return dict(record)


def api_url(endpoint_url: str, deployed: dict[str, Any], stage: str = "api") -> str:
    """LocalStack serves a REST API stage at /_aws/execute-api/<id>/<stage>/."""
    for resource in deployed["resources"]:
        if resource["resource_type"] == "rest_api":
            rest_api_id = resource["rest_api_id"]
            return f"{endpoint_url.rstrip('/')}/_aws/execute-api/{rest_api_id}/{stage}"
    raise RuntimeError("chalice deployed no REST API")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options (defaults suit localstack-compose.yml from the host)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source-dir", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument(
        "--endpoint-url", default=os.environ.get("AWS_ENDPOINT_URL", DEFAULT_ENDPOINT)
    )
    parser.add_argument(
        "--database-url",
        default=os.environ.get("TE_DATABASE_URL", DEFAULT_DATABASE_URL),
        help="the URL as a Lambda container sees it",
    )
    parser.add_argument("--encryption-key", default=os.environ.get("TE_SECRET_ENCRYPTION_KEY"))
    parser.add_argument(
        "--profile",
        choices=("full", "lean"),
        help="each function's timeout, memory and settings as this profile deploys them",
    )
    parser.add_argument("--out", type=Path, help="write the API URL and resources as JSON")
    args = parser.parse_args(argv)
    if not args.encryption_key:
        parser.error("--encryption-key or TE_SECRET_ENCRYPTION_KEY is required")
    return args


def put_secrets(endpoint_url: str, env: dict[str, str], values: dict[str, str]) -> dict[str, str]:
    """The two secrets in LocalStack's Secrets Manager; setting -> the secret's ARN."""
    secrets = botocore.session.get_session().create_client(
        "secretsmanager",
        endpoint_url=endpoint_url,
        region_name=env["AWS_DEFAULT_REGION"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
    )
    return {
        setting: put_secret(secrets, f"task-executor-{STAGE}/{suffix}", values[setting])
        for setting, suffix in SECRET_SETTINGS.items()
    }


def main(argv: list[str] | None = None) -> int:
    """Deploy and print the API URL (and how long the synthesis and the deploy took)."""
    args = parse_args(argv)
    env = dict(os.environ)
    env.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    env.setdefault("AWS_ACCESS_KEY_ID", "test")
    env.setdefault("AWS_SECRET_ACCESS_KEY", "test")
    values = {"TE_DATABASE_URL": args.database_url, "TE_SECRET_ENCRYPTION_KEY": args.encryption_key}
    secret_arns = put_secrets(args.endpoint_url, env, values)
    began = time.monotonic()
    functions = (
        profile_functions(synthesized_template(args.profile, args.source_dir))
        if args.profile
        else None
    )
    synthesized = time.monotonic()
    config = chalice_config(args.source_dir, lambda_environment(env, secret_arns), functions)
    with tempfile.TemporaryDirectory(prefix="te-localstack-") as tmp:
        project = Path(tmp)
        copy_project(args.source_dir, project, config)
        deployed = chalice_deploy(project, args.endpoint_url, env)
    timings = {
        "synth_sec": round(synthesized - began, 1),
        "chalice_deploy_sec": round(time.monotonic() - synthesized, 1),
    }
    stage = config["stages"][STAGE].get("api_gateway_stage", "api")
    result = {
        "api_url": api_url(args.endpoint_url, deployed, stage),
        "profile": args.profile,
        "timings": timings,
        "deployed": deployed,
    }
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    if args.profile:
        print(f"synthesized the {args.profile} profile in {timings['synth_sec']} s")
    print(f"chalice deploy took {timings['chalice_deploy_sec']} s")
    print(f"API: {result['api_url']}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
