"""infra/localstack_deploy.py --profile: each function deployed into LocalStack as the
profile's template deploys it (its timeout, memory and plain settings), the secrets as this
deployment's ARNs. Pure functions, no LocalStack; the end-to-end tests deploy for real."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

INFRA = Path(__file__).resolve().parents[2] / "infra"
sys.path.insert(0, str(INFRA))
try:
    import localstack_deploy
finally:
    sys.path.remove(str(INFRA))

TEMPLATE: dict[str, Any] = {
    "Resources": {
        "APIHandler": {
            "Type": "AWS::Serverless::Function",
            "Properties": {
                "Handler": "app.app",
                "Timeout": 30,
                "MemorySize": 512,
                "Environment": {
                    "Variables": {
                        "TE_PROFILE": "lean",
                        "TE_RATE_LIMIT_PER_SEC": "0",
                        "TE_DATABASE_URL_SECRET_ARN": {"Ref": "SecretsDatabaseUrl"},
                    }
                },
            },
        },
        "RunWorker": {
            "Type": "AWS::Serverless::Function",
            "Properties": {
                "Handler": "chalicelib.wiring.lambdas.run_worker",
                "Timeout": 80,
                "MemorySize": 512,
                "Environment": {
                    "Variables": {"TE_WORKER_SCHEDULER_LOOPS": "delayed_promoter,cron_materializer"}
                },
            },
        },
        "Secret": {"Type": "AWS::SecretsManager::Secret", "Properties": {}},
    }
}


def test_each_function_gets_the_templates_budget_and_plain_settings() -> None:
    assert localstack_deploy.profile_functions(TEMPLATE) == {
        "api_handler": {
            "lambda_timeout": 30,
            "lambda_memory_size": 512,
            "environment_variables": {"TE_PROFILE": "lean", "TE_RATE_LIMIT_PER_SEC": "0"},
        },
        "run_worker": {
            "lambda_timeout": 80,
            "lambda_memory_size": 512,
            "environment_variables": {
                "TE_WORKER_SCHEDULER_LOOPS": "delayed_promoter,cron_materializer"
            },
        },
    }


def test_the_profile_overrides_the_dev_stage_function_by_function(tmp_path: Path) -> None:
    (tmp_path / ".chalice").mkdir()
    (tmp_path / ".chalice" / "config.json").write_text(
        '{"version": "2.0", "app_name": "te", "stages": {"dev": {"api_gateway_stage": "api",'
        ' "lambda_functions": {"run_worker": {"lambda_timeout": 120, "reserved": 1}}}}}'
    )
    functions = localstack_deploy.profile_functions(TEMPLATE)
    config = localstack_deploy.chalice_config(tmp_path, {"TE_X": "1"}, functions)
    stage = config["stages"][localstack_deploy.STAGE]
    assert stage["environment_variables"] == {"TE_X": "1"}
    assert stage["lambda_functions"]["run_worker"]["lambda_timeout"] == 80
    assert stage["lambda_functions"]["run_worker"]["reserved"] == 1
    assert stage["api_gateway_stage"] == "api"


def test_the_api_url_is_localstacks_execute_api_path() -> None:
    deployed = {"resources": [{"resource_type": "rest_api", "rest_api_id": "abc123"}]}
    url = localstack_deploy.api_url("http://127.0.0.1:4566/", deployed, "api")
    assert url == "http://127.0.0.1:4566/_aws/execute-api/abc123/api"
