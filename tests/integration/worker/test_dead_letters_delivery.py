"""Dead letters delivered again by real workers to real HTTP targets on loopback: a
retried execution succeeds with its attempts kept and numbered on, and its new
end is called back; a redrive of a thousand is delivered by two worker processes; retry and
redrive wake an idle worker; the dead-letter view shows errors as recorded (redacted)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from chalicelib.db.connection import Database
from tests.chaos.harness import Stack
from tests.integration.worker.test_callbacks import register
from tests.integration.worker.test_wakeup import LONG_POLL_MS, WAKE_GUARD_S, running
from tests.support.api_client import ApiClient
from tests.support.seed.dead_letters import fail
from tests.support.seed.worker import (
    attempts,
    create_config,
    create_secret,
    http_spec,
    retry_policy,
    seed,
    statuses,
)
from tests.support.served import HttpTarget, Reply
from tests.support.waiting import wait_for
from tests.support.worker_runs import settle

#: The claim or the wake-up decides what these tests see: make test runs them again in
#: CockroachDB's configuration (test-cockroach).
pytestmark = pytest.mark.claim_path

__all__ = ["running"]  # a fixture, used by name

EXECUTION_HEADER = "x-task-executor-execution-id"


def callbacks_of(db: Database, execution_id: str) -> list[tuple[str, str]]:
    rows = db.run(
        "SELECT endpoint, idempotency_key FROM jobs WHERE parent_execution_id = :id"
        " ORDER BY created_at, idempotency_key",
        id=execution_id,
    )
    return [(r["endpoint"], r["idempotency_key"]) for r in rows]


def test_a_retried_dead_letter_is_delivered_with_attempts_kept_and_its_new_end_called_back(
    api: ApiClient, database: Database, make_worker: Any, http_target: HttpTarget
) -> None:
    register(
        api,
        http_target,
        "flaky",
        retry_policy={"max_attempts": 2, "backoff": "fixed", "initial_delay_ms": 0},
    )
    for name in ("cb-ok", "cb-fail"):
        register(api, http_target, name)
        http_target.script(f"/{name}", Reply(200, body="{}"))
    http_target.script("/flaky", Reply(503, body="down"))
    job = {
        "endpoint": "flaky",
        "trigger": "IMMEDIATE",
        "idempotency_key": "r1",
        "input": {},
        "on_success": "cb-ok",
        "on_failure": "cb-fail",
    }
    execution_id = api.post("/jobs", job).body["execution"]["execution_id"]
    worker = make_worker()
    assert settle(worker, database, [execution_id]) == {"FAILED": 1}
    [dead] = api.get("/executions?status=FAILED&endpoint=flaky").body["items"]
    assert (dead["execution_id"], dead["error_type"]) == (execution_id, "HTTP_ERROR")
    assert "503" in dead["error"]

    http_target.script("/flaky", Reply(200, body="{}"))
    retried = api.post(f"/executions/{execution_id}/retry").body
    assert (retried["status"], retried["attempt_count"], retried["max_attempts"]) == (
        "QUEUED",
        2,
        4,
    )
    assert settle(worker, database, [execution_id]) == {"SUCCESS": 1}

    made = [(a["attempt_number"], a["status"]) for a in attempts(database, execution_id)]
    assert made == [(1, "FAILED"), (2, "FAILED"), (3, "SUCCESS")]
    shown = api.get(f"/executions/{execution_id}/attempts").body["items"]
    assert [a["attempt_number"] for a in shown] == [1, 2, 3]
    sent = [r.headers[EXECUTION_HEADER] for r in http_target.received("/flaky")]
    assert sent == [execution_id] * 3  # one send per attempt, same idempotency key
    # Each end called back once: on_failure for the first end, on_success for the new one.
    callback_ids = [
        r["execution_id"]
        for r in database.run(
            "SELECT e.execution_id FROM executions e JOIN jobs j USING (job_id)"
            " WHERE j.parent_execution_id = :id",
            id=execution_id,
        )
    ]
    settle(worker, database, callback_ids)
    assert callbacks_of(database, execution_id) == [
        ("cb-fail", f"callback:{execution_id}:2"),
        ("cb-ok", f"callback:{execution_id}:3"),
    ]
    assert len(http_target.received("/cb-ok")) == len(http_target.received("/cb-fail")) == 1
    api_job = api.get(f"/jobs/{api.get(f'/executions/{execution_id}').body['job_id']}").body
    assert api_job["status"] == "RETIRED"


def test_a_retry_resolves_the_config_as_it_is_now(
    database: Database, make_worker: Any, http_target: HttpTarget, api: ApiClient
) -> None:
    """A new attempt budget is a new run: an operator who fixed a config and retries gets
    the fix (the config snapshot only keeps one budget's retries consistent)."""
    create_config(database, "target-cfg", {"v": "old"})
    http_target.script("/c", Reply(500, body="no"))
    spec = http_spec(http_target.url("/c"), body_template={"v": "{{config.v}}"})
    seeded = seed(database, spec=spec, config_ref="target-cfg")
    assert settle(make_worker(), database, seeded.execution_ids) == {"FAILED": 1}
    create_config(database, "target-cfg", {"v": "new"})
    http_target.script("/c", Reply(200, body="{}"))

    assert api.post(f"/executions/{seeded.execution_id}/retry").status == 200
    assert settle(make_worker(), database, seeded.execution_ids) == {"SUCCESS": 1}

    assert [r.json() for r in http_target.received("/c")] == [{"v": "old"}, {"v": "new"}]


def test_the_dead_letter_view_shows_the_error_as_recorded_never_a_secret(
    api: ApiClient, database: Database, make_worker: Any, http_target: HttpTarget
) -> None:
    secret = "sk-live-dead-letter-0123456789"
    create_secret(database, "api_key", secret)
    http_target.script("/echo", Reply(500, body=f"bad key {secret}"))
    spec = http_spec(
        http_target.url("/echo"), headers={"Authorization": "Bearer {{secret.api_key}}"}
    )
    seeded = seed(database, spec=spec)
    settle(make_worker(), database, seeded.execution_ids)

    reply = api.get(f"/executions?status=FAILED&endpoint={seeded.endpoint}")

    [item] = reply.body["items"]
    assert item["error_type"] == "HTTP_ERROR" and "[REDACTED]" in item["error"]
    assert secret not in json.dumps(reply.body)


@pytest.mark.postgres_only
@pytest.mark.parametrize("how", ["retry", "redrive"])
def test_retry_and_redrive_wake_an_idle_worker(
    api: ApiClient,
    database: Database,
    make_worker: Any,
    running: Callable[..., None],
    http_target: HttpTarget,
    how: str,
) -> None:
    seeded = seed(database, spec=http_spec(http_target.url("/ok")), count=2)
    fail(database, seeded.execution_ids)
    worker = make_worker(worker_poll_interval_ms=LONG_POLL_MS)
    running(worker)
    wait_for(lambda: worker.listener is not None and worker.listener.connects == 1, "a listener")
    wait_for(lambda: worker.sleeps.started >= 1, "the idle sleep")

    if how == "retry":
        assert api.post(f"/executions/{seeded.execution_id}/retry").status == 200
        moved = seeded.execution_ids[:1]
    else:
        now = datetime.now(UTC)
        body = {
            "since": (now - timedelta(hours=1)).isoformat(),
            "until": (now + timedelta(hours=1)).isoformat(),
        }
        assert api.post(f"/endpoints/{seeded.endpoint}/redrive", body).body["requeued"] == 2
        moved = seeded.execution_ids

    wait_for(
        lambda: statuses(database, moved),
        "the moved executions delivered",
        until=lambda counts: counts == {"SUCCESS": len(moved)},
        timeout=WAKE_GUARD_S,
    )
    assert worker.sleeps.timed_out == 0  # claimed before the 10 s poll could fire
    assert worker.sleeps.woken >= 1


def test_two_worker_processes_deliver_a_redrive_of_a_thousand_and_a_retry(
    api: ApiClient, database: Database, db_url: str, http_target: HttpTarget, tmp_path: Path
) -> None:
    http_target.script("/ok", Reply(200, body="{}"))
    seeded = seed(
        database,
        spec=http_spec(http_target.url("/ok")),
        policy=retry_policy(max_attempts=2),
        count=1001,
    )
    thousand, single = seeded.execution_ids[:1000], seeded.execution_ids[1000:]
    created = datetime.now(UTC) - timedelta(minutes=30)
    fail(database, thousand, created_at=created)
    fail(database, single, created_at=created - timedelta(hours=2))  # outside the range
    stack = Stack(db_url, tmp_path)
    try:
        stack.start("worker-1", "chalicelib.worker")
        stack.start("worker-2", "chalicelib.worker")
        body = {
            "since": (created - timedelta(minutes=1)).isoformat(),
            "until": (created + timedelta(minutes=1)).isoformat(),
        }

        assert api.post(f"/endpoints/{seeded.endpoint}/redrive", body).body == {
            "requeued": 1000,
            "more": False,
        }
        retried = api.post(f"/executions/{single[0]}/retry")
        assert retried.status == 200, retried.body
        wait_for(
            lambda: statuses(database, seeded.execution_ids),
            "every execution delivered",
            until=lambda counts: counts == {"SUCCESS": len(seeded.execution_ids)},
            timeout=180,
            interval=0.2,
        )
        assert api.post(f"/endpoints/{seeded.endpoint}/redrive", body).body == {
            "requeued": 0,
            "more": False,
        }
    finally:
        stack.close()

    received = Counter(r.headers.get(EXECUTION_HEADER) for r in http_target.received("/ok"))
    assert set(received) == set(seeded.execution_ids)
    numbers = database.run(
        "SELECT attempt_number, status, count(*) AS n FROM attempts"
        " WHERE execution_id = ANY(CAST(:ids AS TEXT[])) GROUP BY attempt_number, status"
        " ORDER BY attempt_number",
        ids=seeded.execution_ids,
    )
    # Attempts 1 and 2 (the failures) kept; the delivery is attempt 3 of every one (a
    # worker may repeat a send only as a further attempt: none is expected here).
    assert [(r["attempt_number"], r["status"], r["n"]) for r in numbers][:3] == [
        (1, "FAILED", 1001),
        (2, "FAILED", 1001),
        (3, "SUCCESS", 1001),
    ]
    workers = database.run(
        "SELECT count(DISTINCT worker_id) AS n FROM executions"
        " WHERE execution_id = ANY(CAST(:ids AS TEXT[]))",
        ids=seeded.execution_ids,
    )
    assert workers[0]["n"] == 2  # both processes delivered
