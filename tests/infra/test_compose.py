"""localstack-compose.yml is valid Compose and has the services, env and checks it needs.

Docker is not available on the build machines, so the file is validated against the
Compose specification (the schema vendored inside check-jsonschema: no network) and its
content is checked here; test_localstack_e2e.py runs it where a Docker daemon exists.
"""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.localstack import server as localstack_server

REPO_ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO_ROOT / "localstack-compose.yml"
LONG_RUNNING = ("localstack", "cockroachdb", "redis", "redpanda")
APP_SERVICES = ("migrate", "deploy", "worker")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    """The parsed compose file (YAML anchors and merge keys resolved)."""
    return dict(yaml.safe_load(COMPOSE_FILE.read_text()))


def _env(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    assert isinstance(env, dict), "environment is written as a mapping"
    return {str(k): str(v) for k, v in env.items()}


def test_matches_the_compose_specification() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "check_jsonschema",
            "--builtin-schema",
            "vendor.compose-spec",
            str(COMPOSE_FILE),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_has_the_required_services(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) >= {
        "localstack",
        "cockroachdb",
        "cockroachdb-init",
        "migrate",
        "redis",
        "redpanda",
        "deploy",
        "worker",
    }


@pytest.mark.parametrize("name", LONG_RUNNING)
def test_long_running_services_have_healthchecks(compose: dict[str, Any], name: str) -> None:
    healthcheck = compose["services"][name]["healthcheck"]
    assert healthcheck["test"][0] in ("CMD", "CMD-SHELL")
    assert healthcheck["retries"] >= 10


def test_cockroachdb_is_a_single_insecure_node(compose: dict[str, Any]) -> None:
    command = compose["services"]["cockroachdb"]["command"]
    assert "start-single-node" in command
    assert "--insecure" in command


def test_startup_order_uses_conditions(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert services["cockroachdb-init"]["depends_on"] == {
        "cockroachdb": {"condition": "service_healthy"}
    }
    assert services["migrate"]["depends_on"] == {
        "cockroachdb-init": {"condition": "service_completed_successfully"}
    }
    for name in ("deploy", "worker"):
        depends = services[name]["depends_on"]
        assert depends["migrate"] == {"condition": "service_completed_successfully"}
        assert depends["redis"] == {"condition": "service_healthy"}
        assert depends["redpanda"] == {"condition": "service_healthy"}
    assert services["deploy"]["depends_on"]["localstack"] == {"condition": "service_healthy"}


def test_migrations_run_from_the_project_image(compose: dict[str, Any]) -> None:
    migrate = compose["services"]["migrate"]
    assert migrate["command"] == ["python", "-m", "chalicelib.migrate"]
    assert (REPO_ROOT / migrate["build"]["dockerfile"]).is_file()
    assert compose["services"]["worker"]["command"] == ["python", "-m", "chalicelib.worker"]


@pytest.mark.parametrize("name", APP_SERVICES)
def test_app_services_get_the_settings_they_need(compose: dict[str, Any], name: str) -> None:
    env = _env(compose["services"][name])
    assert env["TE_DATABASE_URL"].startswith("postgresql://root@cockroachdb:26257/")
    assert len(base64.b64decode(env["TE_SECRET_ENCRYPTION_KEY"], validate=True)) == 32
    assert env["TE_CLAIM_STRATEGY"] == "conditional_update"
    assert env["TE_LOG_FORMAT"] == "json"
    assert int(env["TE_WORKER_MAX_CONCURRENT"]) > 0
    assert env["TE_REGION"]
    float(env["TE_RATE_LIMIT_PER_SEC"])


def test_lambda_containers_join_the_compose_network(compose: dict[str, Any]) -> None:
    env = _env(compose["services"]["localstack"])
    assert env["LAMBDA_DOCKER_NETWORK"] == compose["networks"]["default"]["name"]
    assert (
        "/var/run/docker.sock:/var/run/docker.sock" in compose["services"]["localstack"]["volumes"]
    )
    # The same services as the host-mode LocalStack that make test runs.
    assert set(env["SERVICES"].split(",")) == set(localstack_server.SERVICES)


def test_deploy_targets_localstack(compose: dict[str, Any]) -> None:
    deploy = compose["services"]["deploy"]
    assert _env(deploy)["AWS_ENDPOINT_URL"] == "http://localstack:4566"
    assert (REPO_ROOT / "infra" / "localstack_deploy.py").is_file()


def test_published_ports_stay_on_loopback(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name}: {port}"
