"""The two entry points: ``python -m chalicelib.worker`` (SIGTERM drain) and the Lambda."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chalicelib.db.connection import Database
from tests.support.environment import ENCRYPTION_KEY
from tests.support.seed.worker import execution, http_spec, seed, statuses
from tests.support.served import HttpTarget, Reply
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[3]


def test_sigterm_drains_in_flight_and_leaves_the_rest_running(
    database: Database, db_url: str, http_target: HttpTarget
) -> None:
    http_target.script("/quick", Reply(200, delay=0.5))
    http_target.script("/stuck", Reply(200, delay=20))
    quick = seed(database, spec=http_spec(http_target.url("/quick"), timeout_ms=10000), count=3)
    stuck = seed(database, spec=http_spec(http_target.url("/stuck"), timeout_ms=30000), count=2)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TE_")}
    env.update(
        TE_DATABASE_URL=db_url,
        TE_SECRET_ENCRYPTION_KEY=ENCRYPTION_KEY,
        TE_ALLOW_PRIVATE_TARGETS="true",
        TE_WORKER_POLL_INTERVAL_MS="50",
        TE_WORKER_SHUTDOWN_TIMEOUT_SEC="3",
        TE_LOG_FORMAT="json",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "chalicelib.worker"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(
            lambda: len(http_target.received()),
            "all five deliveries to start",
            until=lambda n: n == 5,
            timeout=30,
        )
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    assert proc.returncode == 0, stderr
    assert statuses(database, quick.execution_ids) == {"SUCCESS": 3}
    assert statuses(database, stuck.execution_ids) == {"RUNNING": 2}
    assert '"event": "worker_started"' in stderr
    assert '"event": "worker_stopped"' in stderr and '"drained": false' in stderr
    assert '"serialization_retries": ' in stderr and '"reconnects": ' in stderr
    [beat] = database.run("SELECT status FROM region_heartbeats WHERE component LIKE 'worker@%'")
    assert beat["status"] == "DEAD"  # the final heartbeat of a graceful shutdown


@pytest.fixture
def lambda_client(
    chalice_app: Any, lambda_root: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[object]:
    from chalice.test import Client

    monkeypatch.setenv("TE_WORKER_POLL_INTERVAL_MS", "20")
    with Client(chalice_app) as client:
        yield client


def test_lambda_entry_point_delivers_then_drains(
    lambda_client, database: Database, http_target: HttpTarget
) -> None:
    http_target.script("/lambda", Reply(202, body="accepted"))
    seeded = seed(database, spec=http_spec(http_target.url("/lambda")), count=3)

    event = lambda_client.events.generate_cw_event(
        source="aws.events", detail_type="Scheduled Event", detail={}, resources=[]
    )
    response = lambda_client.lambda_.invoke("run_worker", event)

    assert response.payload["drained"] is True and response.payload["in_flight"] == 0
    assert statuses(database, seeded.execution_ids) == {"SUCCESS": 3}
    assert execution(database, seeded.execution_id)["output"] == {
        "status_code": 202,
        "body": "accepted",
    }
