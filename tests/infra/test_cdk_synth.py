"""The CDK stack synthesizes offline and has what a production deployment needs.

Synthesis runs once per session (``synthesis`` fixture in conftest.py) against the real app
when ``app.py`` imports, else against ``fixture_app`` (see conftest.py). The template keeps
the SAM transform that ``chalice package`` emits, so the Lambda functions appear as
``AWS::Serverless::Function`` with their ``Schedule`` events (SAM turns each into an
EventBridge rule at deploy time).
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.infra import ChaliceProject, Synthesis, offline_aws_env

# CloudFormation logical id -> Chalice function name (the handler's last dotted part; the
# module part depends on where the app defines it, app.py or a blueprint).
SCHEDULED = {
    "MaterializeCronTicks": "materialize_cron_ticks",
    "PromoteDelayedExecutions": "promote_delayed_executions",
    "ReclaimStuckExecutions": "reclaim_stuck_executions",
    "RunWorker": "run_worker",
}
SECRET_ENV = ("TE_DATABASE_URL", "TE_SECRET_ENCRYPTION_KEY")
# The `chalice` console script, run by this interpreter (chalice has no __main__).
CHALICE_CLI = "import sys; from chalice.cli import main; sys.exit(main())"
CFN_LINT_CLI = "import sys; from cfnlint.runner import main; sys.exit(main())"


def _statements(policy_document: dict[str, Any]) -> Iterator[dict[str, Any]]:
    statements = policy_document["Statement"]
    yield from statements if isinstance(statements, list) else [statements]


def _all_statements(synthesis: Synthesis) -> Iterator[tuple[str, dict[str, Any]]]:
    for logical_id, role in synthesis.resources("AWS::IAM::Role").items():
        for policy in role["Properties"].get("Policies", []):
            for statement in _statements(policy["PolicyDocument"]):
                yield logical_id, statement
    for logical_id, policy in synthesis.resources("AWS::IAM::Policy").items():
        for statement in _statements(policy["Properties"]["PolicyDocument"]):
            yield logical_id, statement


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_api_and_five_lambda_functions(synthesis: Synthesis) -> None:
    functions = synthesis.resources("AWS::Serverless::Function")
    handlers = {
        logical_id: f["Properties"]["Handler"].rsplit(".", 1)[-1]
        for logical_id, f in functions.items()
    }
    assert handlers == {"APIHandler": "app", **SCHEDULED}
    assert functions["APIHandler"]["Properties"]["Handler"] == "app.app"
    for function in functions.values():
        assert function["Properties"]["Runtime"] == "python3.11"
        assert "VpcConfig" not in function["Properties"]
    assert list(synthesis.resources("AWS::Serverless::Api")) == ["RestAPI"]


def test_scheduled_functions_run_every_minute(synthesis: Synthesis) -> None:
    functions = synthesis.resources("AWS::Serverless::Function")
    for logical_id in SCHEDULED:
        events = functions[logical_id]["Properties"]["Events"].values()
        schedules = [e["Properties"]["Schedule"] for e in events if e["Type"] == "Schedule"]
        assert schedules == ["rate(1 minute)"], logical_id
    assert "Events" not in functions["APIHandler"]["Properties"]


def test_lambdas_get_secret_arns_never_secret_values(synthesis: Synthesis) -> None:
    secrets = set(synthesis.resources("AWS::SecretsManager::Secret"))
    assert len(secrets) == 2
    for logical_id, function in synthesis.resources("AWS::Serverless::Function").items():
        env = function["Properties"]["Environment"]["Variables"]
        assert not set(SECRET_ENV) & set(env), logical_id
        assert env["TE_DATABASE_URL_SECRET_ARN"]["Ref"] in secrets
        assert env["TE_SECRET_ENCRYPTION_KEY_SECRET_ARN"]["Ref"] in secrets
        assert env["TE_LOG_FORMAT"] == "json"
        assert env["TE_CLAIM_STRATEGY"] == "conditional_update"
    run_worker = synthesis.resources("AWS::Serverless::Function")["RunWorker"]
    assert "TE_WORKER_MAX_CONCURRENT" in run_worker["Properties"]["Environment"]["Variables"]


def test_secrets_are_created_empty(synthesis: Synthesis) -> None:
    for secret in synthesis.resources("AWS::SecretsManager::Secret").values():
        assert "SecretString" not in secret["Properties"]
        assert "GenerateSecretString" not in secret["Properties"]


@pytest.mark.parametrize("response_type", ["DEFAULT_4XX", "DEFAULT_5XX"])
def test_gateway_responses_keep_the_error_envelope(
    synthesis: Synthesis, response_type: str
) -> None:
    api = synthesis.resources("AWS::Serverless::Api")["RestAPI"]
    responses = api["Properties"]["DefinitionBody"]["x-amazon-apigateway-gateway-responses"]
    template = responses[response_type]["responseTemplates"]["application/json"]
    rendered = template.replace("$context.error.messageString", '"Forbidden"').replace(
        "$context.requestId", "req-1"
    )
    error = json.loads(rendered)["error"]
    assert error["message"] == "Forbidden"
    assert error["request_id"] == "req-1"
    expected_code = "INVALID_REQUEST" if response_type == "DEFAULT_4XX" else "INTERNAL_ERROR"
    assert error["code"] == expected_code


def test_the_dashboard_page_and_health_need_no_gateway_key_and_everything_else_does(
    synthesis: Synthesis,
) -> None:
    """A browser cannot add x-api-key to a page load, nor a load balancer to its health
    check: GET /ui, its files and GET /health are exempt (SAM's api_key_false marker); every
    other method keeps the API-wide default."""
    paths = synthesis.resources("AWS::Serverless::Api")["RestAPI"]["Properties"]["DefinitionBody"][
        "paths"
    ]
    for path in ("/health", "/health/live", "/ui", "/ui/{name}"):
        assert paths[path]["get"]["security"] == [{"api_key_false": []}]
        assert "x-amazon-apigateway-integration" in paths[path]["get"]
    marked = sorted(
        f"{method.upper()} {path}"
        for path, methods in paths.items()
        for method, operation in methods.items()
        if isinstance(operation, dict) and "security" in operation
    )
    assert marked == ["GET /health", "GET /health/live", "GET /ui", "GET /ui/{name}"]


def test_unknown_route_is_a_404_envelope(synthesis: Synthesis) -> None:
    api = synthesis.resources("AWS::Serverless::Api")["RestAPI"]
    responses = api["Properties"]["DefinitionBody"]["x-amazon-apigateway-gateway-responses"]
    assert responses["MISSING_AUTHENTICATION_TOKEN"]["statusCode"] == "404"
    assert (
        "ROUTE_NOT_FOUND"
        in (responses["MISSING_AUTHENTICATION_TOKEN"]["responseTemplates"]["application/json"])
    )


def test_fargate_worker_gets_secrets_through_ecs(synthesis: Synthesis) -> None:
    (service,) = synthesis.resources("AWS::ECS::Service").values()
    assert service["Properties"]["LaunchType"] == "FARGATE"
    (task,) = synthesis.resources("AWS::ECS::TaskDefinition").values()
    assert task["Properties"]["RequiresCompatibilities"] == ["FARGATE"]
    (container,) = task["Properties"]["ContainerDefinitions"]
    assert container["Command"] == ["python", "-m", "chalicelib.worker"]
    secrets = {s["Name"]: s["ValueFrom"] for s in container["Secrets"]}
    assert set(secrets) == set(SECRET_ENV)
    secret_ids = set(synthesis.resources("AWS::SecretsManager::Secret"))
    assert {ref["Ref"] for ref in secrets.values()} == secret_ids
    env = {e["Name"]: e["Value"] for e in container["Environment"]}
    assert not set(SECRET_ENV) & set(env)
    assert env["TE_CLAIM_STRATEGY"] == "conditional_update"
    assert container["LogConfiguration"]["LogDriver"] == "awslogs"


def test_worker_image_is_built_from_the_worker_dockerfile(synthesis: Synthesis) -> None:
    assets = json.loads((synthesis.outdir / "dev.assets.json").read_text())
    (image,) = assets["dockerImages"].values()
    assert image["source"]["dockerFile"] == "infra/worker.Dockerfile"
    assert image["source"]["dockerBuildTarget"] == "worker"  # the runtime only
    staged = synthesis.outdir / image["source"]["directory"]
    assert (staged / "infra" / "worker.Dockerfile").is_file()
    assert not (staged / ".venv").exists(), "the build context must not carry the venv"
    dockerfile = (staged / "infra" / "worker.Dockerfile").read_text()
    assert "FROM python:3.11-slim" in dockerfile
    assert "USER 10001" in dockerfile
    assert 'CMD ["python", "-m", "chalicelib.worker"]' in dockerfile


def test_every_log_group_has_retention(synthesis: Synthesis) -> None:
    groups = synthesis.resources("AWS::Logs::LogGroup")
    assert len(groups) == 6  # five Lambda functions + the Fargate worker
    for logical_id, group in groups.items():
        assert group["Properties"]["RetentionInDays"] == 30, logical_id
    lambda_groups = {
        json.dumps(g["Properties"]["LogGroupName"])
        for g in groups.values()
        if "LogGroupName" in g["Properties"]
    }
    for logical_id in ["APIHandler", *SCHEDULED]:
        assert any(f'"Ref": "{logical_id}"' in name for name in lambda_groups), logical_id


def test_alarms_on_failed_and_reclaimed_executions(synthesis: Synthesis) -> None:
    patterns = {
        f["Properties"]["MetricTransformations"][0]["MetricName"]: f["Properties"]["FilterPattern"]
        for f in synthesis.resources("AWS::Logs::MetricFilter").values()
    }
    assert patterns == {
        "ExecutionsFailed": '{ $.event = "execution_failed" }',
        "ExecutionsReclaimed": '{ $.event = "reclaimed" }',
        "EndpointsAutoPaused": '{ $.event = "endpoint_auto_paused" }',
        # The queue lag, failure rate and stopped-process alarms' (tests/infra/test_alarms.py).
        "OldestDueLagSeconds": '{ $.event = "queue_health" }',
        "DeliveryAttempts": '{ $.event = "queue_health" }',
        "DeliveryAttemptsFailed": '{ $.event = "queue_health" }',
        "LiveWorkers": '{ $.event = "queue_health" }',
        "LiveSchedulers": '{ $.event = "queue_health" }',
    }
    alarms = synthesis.resources("AWS::CloudWatch::Alarm").values()
    alarmed = {
        (a["Properties"]["Namespace"], a["Properties"]["MetricName"])
        for a in alarms
        if "MetricName" in a["Properties"]  # not the metric math alarm
    }
    assert ("TaskExecutor", "ExecutionsFailed") in alarmed
    assert ("TaskExecutor", "ExecutionsReclaimed") in alarmed
    assert ("TaskExecutor", "EndpointsAutoPaused") in alarmed
    assert ("AWS/Lambda", "Errors") in alarmed
    assert all(a["Properties"]["AlarmActions"] for a in alarms)


def test_iam_has_no_wildcard_actions(synthesis: Synthesis) -> None:
    statements = list(_all_statements(synthesis))
    assert statements
    for logical_id, statement in statements:
        for action in _as_list(statement["Action"]):
            assert "*" not in action, f"{logical_id}: {action}"
        if statement["Resource"] == "*":
            # The only action AWS requires on every resource.
            assert _as_list(statement["Action"]) == ["ecr:GetAuthorizationToken"], logical_id


def test_lambda_role_is_exactly_secrets_and_own_logs(synthesis: Synthesis) -> None:
    lambda_statements = [s for lid, s in _all_statements(synthesis) if lid == "DefaultRole"]
    lambda_statements += [
        s for lid, s in _all_statements(synthesis) if lid.startswith("LambdaLogsPolicy")
    ]
    actions = sorted(a for s in lambda_statements for a in _as_list(s["Action"]))
    assert actions == ["logs:CreateLogStream", "logs:PutLogEvents", "secretsmanager:GetSecretValue"]


def test_cfn_lint_finds_no_errors(synthesis: Synthesis) -> None:
    result = subprocess.run(
        [sys.executable, "-c", CFN_LINT_CLI, "--format", "parseable", str(synthesis.template_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # cfn-lint's exit code is a bit mask: 2 errors, 4 warnings, 8 informational.
    assert not result.returncode & 2, result.stdout + result.stderr
    assert result.returncode in (0, 4, 8, 12), result.stdout + result.stderr


def test_chalice_package_dev_stage_offline(chalice_project: ChaliceProject, tmp_path: Path) -> None:
    out = tmp_path / "package"
    result = subprocess.run(
        [sys.executable, "-c", CHALICE_CLI, "package", "--stage", "dev", str(out)],
        cwd=chalice_project.path,
        env=offline_aws_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    template = json.loads((out / "sam.json").read_text())
    handlers = {
        r["Properties"]["Handler"].rsplit(".", 1)[-1]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Serverless::Function"
    }
    assert handlers == {"app", *SCHEDULED.values()}
    with zipfile.ZipFile(out / "deployment.zip") as archive:
        assert "app.py" in archive.namelist()


def test_api_keys_and_a_usage_plan_limit_each_client_across_containers(
    synthesis: Synthesis,
) -> None:
    auth = synthesis.resources("AWS::Serverless::Api")["RestAPI"]["Properties"]["Auth"]
    assert auth["ApiKeyRequired"] is True
    plan = auth["UsagePlan"]
    assert plan["CreateUsagePlan"] == "PER_API"
    assert plan["Throttle"] == {"RateLimit": 50, "BurstLimit": 100}
    # The per-process token bucket would give every Lambda container its own budget.
    api = synthesis.resources("AWS::Serverless::Function")["APIHandler"]
    assert api["Properties"]["Environment"]["Variables"]["TE_RATE_LIMIT_PER_SEC"] == "0"
