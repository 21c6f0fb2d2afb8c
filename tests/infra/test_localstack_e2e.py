"""End to end in LocalStack: deploy the Lambda stack and deliver one job.

Runs against one of two LocalStacks (marker ``localstack``: ``make test`` runs it beside
the main suite, with tests/localstack):

* where a Docker daemon is reachable, localstack-compose.yml (LocalStack, CockroachDB with
  migrations, Redis, Redpanda and the Fargate-shaped worker), deployed here with
  infra/localstack_deploy.py; ``TE_E2E_KEEP_STACK=1`` leaves the containers running;
* elsewhere, LocalStack in host mode with the ``lean`` profile deployed
  (tests/localstack/plugin.py: ``host_localstack``, ``localstack_deployment``; the
  session's PostgreSQL, and the session's Redis for the stream), skipped, saying why,
  where there is no Python >= 3.12.

Either way pytest-localstack's ``RunningSession`` attaches to it (readiness checks and
botocore clients); the test registers a Redis Stream endpoint through API Gateway, fires
an IMMEDIATE job and waits for the delivery to land in Redis.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.localstack.plugin import FUNCTIONS
from tests.support.infra import REPO_ROOT

COMPOSE = ["docker", "compose", "-f", str(REPO_ROOT / "localstack-compose.yml")]
LOCALSTACK_SERVICES = ["lambda", "apigateway", "events", "iam", "logs", "secretsmanager", "sts"]
API_KEY = "te-local-api-key"  # TE_BOOTSTRAP_API_KEY in localstack-compose.yml
REDIS_URL_IN_DOCKER = "redis://redis:6379/0"


def _docker_daemon_reachable() -> bool:
    """``GET /_ping`` on the daemon named by DOCKER_HOST (default: the Unix socket).

    A raw socket rather than docker-py, whose failed connects leak their socket.
    """
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    parsed = urllib.parse.urlparse(host)
    try:
        if parsed.scheme == "unix":
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            address: Any = parsed.path
        elif parsed.scheme == "tcp" and parsed.hostname:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            address = (parsed.hostname, parsed.port or 2375)
        else:
            return False
        with sock:
            sock.settimeout(5)
            sock.connect(address)
            sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            status_line = sock.recv(1024).split(b"\r\n", 1)[0]
    except OSError:
        return False
    return status_line.startswith(b"HTTP/1.") and b" 200 " in status_line + b" "


DOCKER = _docker_daemon_reachable()
pytestmark = pytest.mark.localstack


@dataclass(frozen=True)
class Deployed:
    """Where the deployed API answers, and the Redis the Lambdas and this test see."""

    api_url: str
    api_key: str
    redis_url_for_lambdas: str
    redis_url_here: str


@pytest.fixture(scope="module")
def compose_stack() -> Iterator[None]:
    """``docker compose up`` the long-running services (their one-shot deps run first)."""
    subprocess.run(
        [
            *COMPOSE,
            "up",
            "-d",
            "--build",
            "--wait",
            "localstack",
            "cockroachdb",
            "redis",
            "redpanda",
            "worker",
        ],
        check=True,
        timeout=900,
    )
    yield
    if os.environ.get("TE_E2E_KEEP_STACK") != "1":
        subprocess.run([*COMPOSE, "down", "-v"], check=False, timeout=300)


@pytest.fixture(scope="module")
def localstack(request: pytest.FixtureRequest) -> Iterator[Any]:
    """pytest-localstack attached to the compose LocalStack on 127.0.0.1:4566, or to the
    host-mode one."""
    from pytest_localstack.session import RunningSession

    if DOCKER:
        request.getfixturevalue("compose_stack")
        services: Any = LOCALSTACK_SERVICES
    else:
        host = request.getfixturevalue("host_localstack")
        services = dict.fromkeys(LOCALSTACK_SERVICES, host.port)
    session = RunningSession("127.0.0.1", services=services, region_name="us-east-1")
    with session:
        yield session


@pytest.fixture(scope="module")
def deployment(
    localstack: Any, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Deployed:
    """The Chalice app in LocalStack: deployed here into the compose stack, or the host-mode
    session's ``lean`` deployment."""
    if not DOCKER:
        deployed = request.getfixturevalue("localstack_deployment")
        redis_url = request.getfixturevalue("redis_url")
        return Deployed(deployed.api_url, deployed.api_key, redis_url, redis_url)
    out = tmp_path_factory.mktemp("localstack") / "deployed.json"
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": localstack.endpoint_url("lambda"),
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "TE_SECRET_ENCRYPTION_KEY": "dGFzay1leGVjdXRvci1sb2NhbC1vbmx5LWtleS0wMDE=",
        "TE_BOOTSTRAP_API_KEY": API_KEY,
        "TE_LOG_FORMAT": "json",
    }
    subprocess.run(
        [sys.executable, str(REPO_ROOT / "infra" / "localstack_deploy.py"), "--out", str(out)],
        env=env,
        check=True,
        timeout=900,
    )
    record = json.loads(Path(out).read_text())
    return Deployed(record["api_url"], API_KEY, REDIS_URL_IN_DOCKER, "redis://127.0.0.1:6379/0")


def _call(deployed: Deployed, method: str, path: str, body: Any = None) -> Any:
    request = urllib.request.Request(  # noqa: S310 - a LocalStack URL on loopback
        f"{deployed.api_url}{path}",
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={
            "Authorization": f"Bearer {deployed.api_key}",
            "Content-Type": "application/json",
        },
    )
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
        return json.loads(response.read() or b"null")


def test_lambdas_and_schedules_are_deployed(localstack: Any, deployment: Deployed) -> None:
    client = localstack.botocore.client("lambda")
    names = {f["FunctionName"] for f in client.list_functions()["Functions"]}
    assert set(FUNCTIONS.values()) <= names
    events = localstack.botocore.client("events")
    schedules = [r.get("ScheduleExpression") for r in events.list_rules()["Rules"]]
    assert schedules.count("rate(1 minute)") >= 4


def test_one_job_is_delivered_to_a_redis_stream(deployment: Deployed) -> None:
    import redis

    suffix = uuid.uuid4().hex[:8]
    stream = f"e2e:{suffix}"
    _call(
        deployment,
        "POST",
        "/payload-specs",
        {"name": f"e2e-{suffix}", "schema": {"type": "object"}},
    )
    _call(
        deployment,
        "POST",
        "/endpoints",
        {
            "name": f"e2e-{suffix}",
            "type": "REDIS_STREAM",
            "payload_spec": f"e2e-{suffix}",
            "spec": {
                "redis_url": deployment.redis_url_for_lambdas,
                "stream": stream,
                "fields_template": {"note": "{{input.note}}"},
                "timeout_ms": 3000,
            },
        },
    )
    job = _call(
        deployment,
        "POST",
        "/jobs",
        {
            "endpoint": f"e2e-{suffix}",
            "trigger": "IMMEDIATE",
            "idempotency_key": f"e2e-{suffix}",
            "input": {"note": "hello"},
        },
    )
    execution_id = job["execution"]["execution_id"]

    # The compose worker delivers within seconds; the run_worker Lambda within a minute.
    deadline = time.monotonic() + 240
    status = None
    while time.monotonic() < deadline:
        status = _call(deployment, "GET", f"/executions/{execution_id}")["status"]
        if status in ("SUCCESS", "FAILED"):
            break
        time.sleep(2)
    attempts = _call(deployment, "GET", f"/executions/{execution_id}/attempts")["items"]
    assert status == "SUCCESS", json.dumps(attempts)
    entries = redis.Redis.from_url(deployment.redis_url_here).xrange(stream) or []
    assert [fields[b"note"] for _, fields in entries if fields] == [b"hello"]
