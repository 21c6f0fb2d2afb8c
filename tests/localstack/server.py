"""LocalStack in host mode (no Docker), on 127.0.0.1 only: how it is started and stopped.

``python -m localstack.runtime.main`` from ``.venv-localstack`` (``make localstack``) with:

* the gateway on ``127.0.0.1:<free port>`` served by hypercorn (LocalStack's default
  server binds 0.0.0.0 even when told 127.0.0.1), its own name ``localhost.localstack.cloud``;
* nothing that reaches out: dummy credentials, no instance metadata
  (``AWS_EC2_METADATA_DISABLED``), no analytics (``DISABLE_EVENTS``), no certificate
  download (``SKIP_SSL_CERT_DOWNLOAD``), no DNS server (``DNS_ADDRESS=0``), and the loopback
  guard (``tests/localstack/guard`` on ``PYTHONPATH``: its ``sitecustomize`` refuses any
  connect or lookup outside loopback in LocalStack and every Python process it starts,
  reporting each refusal to a file);
* Lambda functions run by the project's executor (``LAMBDA_RUNTIME_EXECUTOR=host``,
  ``tests/localstack/hostlambda``; its code is taken from the tree through ``PYTHONPATH``,
  the installed copy only registers the plugin), created synchronously (no Pending state
  to wait out), and nothing of the caller's environment but PATH, LANG and PYENV_ROOT.

Everything LocalStack writes lives under one temporary directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.localstack import pythons
from tests.support.served import die_with_parent, free_port

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
VENV = REPO_ROOT / ".venv-localstack"
GUARD_DIR = HERE / "guard"
EXECUTOR_DIR = HERE / "hostlambda"
REGION = "us-east-1"
SERVICES = (
    "lambda",
    "apigateway",
    "events",
    "iam",
    "logs",
    "secretsmanager",
    "s3",
    "sts",
    "cloudwatch",
)
#: Credentials LocalStack accepts; nothing outside it would.
DUMMY_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
#: The settings that keep LocalStack (and the boto3 in every process) off the network.
OFFLINE = {
    "AWS_EC2_METADATA_DISABLED": "true",
    "DISABLE_EVENTS": "1",
    "SKIP_SSL_CERT_DOWNLOAD": "1",
    "DNS_ADDRESS": "0",
}


def localstack_python() -> tuple[str | None, str]:
    """``.venv-localstack``'s Python, or None and why there is none (a skip's message)."""
    python = VENV / "bin" / "python"
    if python.is_file():
        return str(python), ""
    if pythons.newest() is None:
        return None, f"LocalStack host mode skipped: {pythons.why_none()}"
    return None, f"LocalStack host mode skipped: no {VENV.name} (run `make localstack`)"


def localstack_env(port: int, root: Path, report: Path) -> dict[str, str]:
    """The whole environment of the LocalStack process."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "HOME": str(root),
        # Where the executor looks for each runtime's Python (HOME is not the user's here).
        "PYENV_ROOT": os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv"),
        "TMPDIR": str(root / "tmp"),
        "PYTHONPATH": os.pathsep.join((str(GUARD_DIR), str(EXECUTOR_DIR))),
        "TE_LOOPBACK_GUARD_REPORT": str(report),
        **DUMMY_CREDENTIALS,
        "AWS_DEFAULT_REGION": REGION,
        **OFFLINE,
        "GATEWAY_LISTEN": f"127.0.0.1:{port}",
        "GATEWAY_SERVER": "hypercorn",
        "LOCALSTACK_HOST": f"localhost.localstack.cloud:{port}",
        "SERVICES": ",".join(SERVICES),
        "OVERRIDE_IN_DOCKER": "0",
        "FILESYSTEM_ROOT": str(root / "filesystem"),
        "CONFIG_DIR": str(root / "config"),
        "LAMBDA_RUNTIME_EXECUTOR": "host",
        "LAMBDA_SYNCHRONOUS_CREATE": "1",
        "LAMBDA_RUNTIME_ENVIRONMENT_TIMEOUT": "60",
    }


@dataclass
class HostLocalStack:
    """A running host-mode LocalStack and what the tests read from it."""

    port: int
    root: Path
    proc: subprocess.Popen[bytes]
    started_sec: float = 0.0
    version: str = ""
    python: str = ""
    clients: dict[str, Any] = field(default_factory=dict)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.root / "localstack.log"

    @property
    def guard_report(self) -> Path:
        return self.root / "loopback-guard.jsonl"

    def refusals(self) -> list[dict[str, Any]]:
        """What the loopback guard refused in LocalStack and its functions so far."""
        if not self.guard_report.is_file():
            return []
        lines = self.guard_report.read_text().splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def client(self, service: str) -> Any:
        """A boto3 client of this LocalStack (dummy credentials), made once per service."""
        if service not in self.clients:
            import boto3

            self.clients[service] = boto3.client(
                service,
                endpoint_url=self.endpoint,
                region_name=REGION,
                aws_access_key_id=DUMMY_CREDENTIALS["AWS_ACCESS_KEY_ID"],
                aws_secret_access_key=DUMMY_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            )
        return self.clients[service]

    def health(self) -> dict[str, Any]:
        url = f"{self.endpoint}/_localstack/health"
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback
            return dict(json.loads(response.read()))

    def log_tail(self, lines: int = 60) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.is_file() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM (LocalStack stops its services and function processes), then SIGKILL."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def start(python: str, root: Path, timeout: float = 90.0) -> HostLocalStack:
    """Start LocalStack and wait until every service of :data:`SERVICES` is available."""
    port = free_port()
    (root / "tmp").mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    log = (root / "localstack.log").open("wb")
    proc = subprocess.Popen(
        [python, "-m", "localstack.runtime.main"],
        cwd=root,
        env=localstack_env(port, root, root / "loopback-guard.jsonl"),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        preexec_fn=die_with_parent,
    )
    log.close()
    server = HostLocalStack(port=port, root=root, proc=proc, python=python)
    try:
        _wait_available(server, began + timeout)
    except BaseException:
        server.stop()
        raise
    server.started_sec = time.monotonic() - began
    server.version = str(server.health().get("version", ""))
    return server


def _wait_available(server: HostLocalStack, deadline: float) -> None:
    wanted = set(SERVICES)
    while True:
        if server.proc.poll() is not None:
            raise RuntimeError(
                f"LocalStack exited ({server.proc.returncode}):\n{server.log_tail()}"
            )
        try:
            services = server.health().get("services", {})
        except OSError:
            services = {}
        if all(services.get(name) in ("available", "running") for name in wanted):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"LocalStack not ready: {services}\n{server.log_tail()}")
        time.sleep(0.2)


def python_version(python: str) -> str:
    """``3.13.0`` for the report."""
    done = subprocess.run(
        [python, "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or sys.version.split()[0]
