"""pytest fixtures of the LocalStack end-to-end tests: LocalStack in host mode, the service
deployed into it, a database and an HTTP sink on loopback. Registered by
``tests/localstack/conftest.py`` and ``tests/infra/conftest.py`` (one plugin, so one
LocalStack per session whichever directory asks for it).

* ``host_localstack``: :mod:`tests.localstack.server` (skipped, saying why, without
  ``.venv-localstack`` or a Python >= 3.12);
* ``localstack_deployment``: the ``lean`` profile deployed as docs/how-to/deploy.md says
  (``infra/localstack_deploy.py --profile lean``: ``chalice deploy`` with each function's
  timeout, memory and settings from the profile's template) with the session's embedded
  PostgreSQL (a database of its own, migrated) as the database;
* ``localstack_sink``: the HTTP target the deliveries go to (tests/support/served.py).

The summary at the end of the run says how long LocalStack took to start and the deploy
took, and what the loopback guard refused.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.localstack import server
from tests.support.pg import PgServer, migrated_database
from tests.support.served import HttpTarget

API_KEY = "te-localstack-api-key-0123456789"
#: base64 of 32 bytes; a key for this test only.
ENCRYPTION_KEY = "dGFzay1leGVjdXRvci1sb2NhbC1vbmx5LWtleS0wMDE="
APP = "task-executor-localstack"
#: Chalice function name -> the deployed Lambda (the API's is named after the app).
FUNCTIONS = {
    "api_handler": APP,
    "materialize_cron_ticks": f"{APP}-materialize_cron_ticks",
    "promote_delayed_executions": f"{APP}-promote_delayed_executions",
    "reclaim_stuck_executions": f"{APP}-reclaim_stuck_executions",
    "run_worker": f"{APP}-run_worker",
}
#: What test_localstack_guard.py aims at on purpose (a TEST-NET-1 address, a name needing
#: DNS); any other refusal means something tried to leave loopback.
GUARD_PROBES = ("192.0.2.123", "guard-probe.example")
#: What the run measured, for the terminal summary.
REPORT: dict[str, str] = {}


@dataclass(frozen=True)
class Deployment:
    """The deployed service: where its API answers and what was deployed."""

    api_url: str
    api_key: str
    record: dict[str, Any]
    deployed_at: float  #: time.time() when the deploy returned

    def functions(self) -> dict[str, str]:
        return dict(FUNCTIONS)


@pytest.fixture(scope="session")
def host_localstack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[server.HostLocalStack]:
    """LocalStack in host mode on 127.0.0.1, started once per session."""
    python, why = server.localstack_python()
    if python is None:
        pytest.skip(why)
    root = tmp_path_factory.mktemp("localstack")
    started = server.start(python, root)
    REPORT["LocalStack"] = (
        f"{started.version} in host mode on {started.endpoint} (Python "
        f"{server.python_version(python)}): started in {started.started_sec:.1f} s"
    )
    try:
        yield started
    finally:
        REPORT["loopback guard"] = _refusals_summary(started)
        started.stop()


def _refusals_summary(started: server.HostLocalStack) -> str:
    refused = started.refusals()
    probes = [r for r in refused if any(probe in r["target"] for probe in GUARD_PROBES)]
    lines = [
        f"refused {len(refused)} attempt(s) to leave loopback, {len(probes)} of them the "
        "guard probes' (test_localstack_guard.py)"
    ]
    for line in refused:
        who = line["function"] or (
            "LocalStack" if line["pid"] == started.proc.pid else line["process"]
        )
        lines.append(f"    {who}: {line['what']} {line['target']}")
    return "\n".join(lines)


@pytest.fixture(scope="session")
def localstack_sink() -> Iterator[HttpTarget]:
    """The HTTP target of the deployed service's deliveries, on loopback."""
    sink = HttpTarget()
    yield sink
    sink.close()


@pytest.fixture(scope="session")
def localstack_database(pg_server: PgServer) -> Iterator[str]:
    """A migrated database of the session's PostgreSQL for the deployment alone."""
    with migrated_database(pg_server, "te_localstack_") as url:
        yield url


def deploy_env(endpoint: str, database_url: str) -> dict[str, str]:
    """The deploy's environment: this one without AWS or TE settings, plus the deployment's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "TE_"))}
    env.update(
        AWS_ENDPOINT_URL=endpoint,
        AWS_DEFAULT_REGION=server.REGION,
        AWS_CONFIG_FILE=os.devnull,
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
        **server.DUMMY_CREDENTIALS,
        **{k: v for k, v in server.OFFLINE.items() if k.startswith("AWS_")},
        TE_DATABASE_URL=database_url,
        TE_SECRET_ENCRYPTION_KEY=ENCRYPTION_KEY,
        TE_BOOTSTRAP_API_KEY=API_KEY,
    )
    return env


@pytest.fixture(scope="session")
def localstack_deployment(
    host_localstack: server.HostLocalStack,
    localstack_database: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Deployment:
    """The ``lean`` profile deployed into the session's LocalStack."""
    out = tmp_path_factory.mktemp("deploy") / "deployed.json"
    began = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            str(server.REPO_ROOT / "infra" / "localstack_deploy.py"),
            "--profile",
            "lean",
            "--out",
            str(out),
        ],
        env=deploy_env(host_localstack.endpoint, localstack_database),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, f"deploy failed:\n{done.stdout}\n{done.stderr}"
    record = json.loads(Path(out).read_text())
    timings = record["timings"]
    REPORT["deploy"] = (
        f"lean profile in {time.monotonic() - began:.1f} s (synthesis {timings['synth_sec']} s, "
        f"chalice deploy {timings['chalice_deploy_sec']} s)"
    )
    return Deployment(
        api_url=record["api_url"], api_key=API_KEY, record=record, deployed_at=time.time()
    )


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """LocalStack's start, the deploy's time and the guard's refusals, in the output."""
    if REPORT:
        terminalreporter.section("LocalStack (host mode)")
        for what, text in REPORT.items():
            terminalreporter.write_line(f"{what}: {text}")
