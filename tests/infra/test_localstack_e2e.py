"""End to end in LocalStack: deploy the Lambda stack and deliver one job.

Runs only where a Docker daemon is reachable (skipped elsewhere, e.g. on the build
machines). It brings up localstack-compose.yml (LocalStack, CockroachDB with migrations,
Redis, Redpanda and the Fargate-shaped worker), attaches pytest-localstack's
``RunningSession`` to that LocalStack (readiness checks and botocore clients), deploys the
Chalice app with infra/localstack_deploy.py, then registers a Redis Stream endpoint through
API Gateway, fires an IMMEDIATE job and waits for the delivery to land in Redis.

``TE_E2E_KEEP_STACK=1`` leaves the containers running afterwards.
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
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO_ROOT

COMPOSE = ["docker", "compose", "-f", str(REPO_ROOT / "localstack-compose.yml")]
LOCALSTACK_SERVICES = ["lambda", "apigateway", "events", "iam", "logs", "secretsmanager", "sts"]
API_KEY = "te-local-api-key"  # TE_BOOTSTRAP_API_KEY in localstack-compose.yml
REDIS_URL_IN_DOCKER = "redis://redis:6379/0"
FUNCTIONS = (
    "api_handler",
    "materialize_cron_ticks",
    "promote_delayed_executions",
    "reclaim_stuck_executions",
    "run_worker",
)


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


pytestmark = [
    pytest.mark.docker,
    pytest.mark.skipif(not _docker_daemon_reachable(), reason="needs a Docker daemon (LocalStack)"),
]


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
def localstack(compose_stack: None) -> Iterator[Any]:
    """pytest-localstack attached to the compose LocalStack on 127.0.0.1:4566."""
    from pytest_localstack.session import RunningSession

    session = RunningSession("127.0.0.1", services=LOCALSTACK_SERVICES, region_name="us-east-1")
    with session:
        yield session


@pytest.fixture(scope="module")
def deployment(localstack: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Deploy the Chalice app into LocalStack; return the deploy script's record."""
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
    return dict(json.loads(Path(out).read_text()))


def _call(api_url: str, method: str, path: str, body: Any = None) -> Any:
    request = urllib.request.Request(  # noqa: S310 - a LocalStack URL on loopback
        f"{api_url}{path}",
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
        return json.loads(response.read() or b"null")


def test_lambdas_and_schedules_are_deployed(localstack: Any, deployment: dict[str, Any]) -> None:
    client = localstack.botocore.client("lambda")
    names = {f["FunctionName"] for f in client.list_functions()["Functions"]}
    for function in FUNCTIONS:
        assert f"task-executor-localstack-{function}" in names
    events = localstack.botocore.client("events")
    schedules = [r.get("ScheduleExpression") for r in events.list_rules()["Rules"]]
    assert schedules.count("rate(1 minute)") >= 4


def test_one_job_is_delivered_to_a_redis_stream(deployment: dict[str, Any]) -> None:
    import redis

    api = deployment["api_url"]
    suffix = uuid.uuid4().hex[:8]
    stream = f"e2e:{suffix}"
    _call(api, "POST", "/payload-specs", {"name": f"e2e-{suffix}", "schema": {"type": "object"}})
    _call(
        api,
        "POST",
        "/endpoints",
        {
            "name": f"e2e-{suffix}",
            "type": "REDIS_STREAM",
            "payload_spec": f"e2e-{suffix}",
            "spec": {
                "redis_url": REDIS_URL_IN_DOCKER,
                "stream": stream,
                "fields_template": {"note": "{{input.note}}"},
                "timeout_ms": 3000,
            },
        },
    )
    job = _call(
        api,
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
        status = _call(api, "GET", f"/executions/{execution_id}")["status"]
        if status in ("SUCCESS", "FAILED"):
            break
        time.sleep(2)
    assert status == "SUCCESS"
    entries = redis.Redis.from_url("redis://127.0.0.1:6379/0").xrange(stream) or []
    assert [fields[b"note"] for _, fields in entries if fields] == [b"hello"]
