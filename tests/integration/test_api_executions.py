"""Execution endpoints: details, queue position, cancel, attempts, logs, job executions,
and long-polling (Prefer: wait=N)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chalicelib.db.connection import Database
from chalicelib.services.executions import ExecutionService
from chalicelib.services.jobs.service import JobService
from chalicelib.services.longpoll import Poller
from tests.support.api_client import ApiClient
from tests.support.clock import FakeClock
from tests.support.seed import jobs as f

EP = "send-welcome-email"


@pytest.fixture
def endpoint(database: Database) -> str:
    return f.welcome_endpoint(database)


def one_shot(api: ApiClient, key: str = "k") -> dict[str, Any]:
    reply = api.post(
        "/jobs",
        {"endpoint": EP, "trigger": "IMMEDIATE", "idempotency_key": key, "input": {"user_id": "u"}},
    )
    assert reply.status == 201
    return dict(reply.body)


def test_execution_details(api: ApiClient, database: Database, endpoint: str) -> None:
    job = one_shot(api)
    execution_id = job["execution"]["execution_id"]
    body = api.get(f"/executions/{execution_id}").body
    assert list(body) == [
        "execution_id",
        "job_id",
        "endpoint",
        "endpoint_type",
        "status",
        "input",
        "output",
        "attempt_count",
        "max_attempts",
        "run_at",
        "started_at",
        "completed_at",
        "duration_ms",
        "created_at",
        "queue_position",
        "endpoint_version",
    ]
    assert body["endpoint_version"] == "snapshot"
    assert (body["job_id"], body["endpoint"], body["endpoint_type"]) == (job["job_id"], EP, "HTTP")
    assert (body["status"], body["attempt_count"], body["max_attempts"]) == ("QUEUED", 0, 3)
    assert body["queue_position"] == 1
    f.set_execution(
        database,
        execution_id,
        status="SUCCESS",
        started_at=datetime(2030, 1, 1, tzinfo=UTC),
        completed_at=datetime(2030, 1, 1, 0, 0, 1, tzinfo=UTC),
        duration_ms=1000,
        attempt_count=1,
    )
    database.execute(
        "UPDATE executions SET output = CAST(:o AS JSONB) WHERE execution_id = :id",
        o='{"status_code": 200, "body": "OK"}',
        id=execution_id,
    )
    done = api.get(f"/executions/{execution_id}").body
    assert done["output"] == {"status_code": 200, "body": "OK"}
    assert done["started_at"] == "2030-01-01T00:00:00Z"
    assert done["completed_at"] == "2030-01-01T00:00:01Z"
    assert (done["duration_ms"], done["queue_position"]) == (1000, None)
    missing = api.get("/executions/exec_missing")
    assert (missing.status, missing.error_code) == (404, "EXECUTION_NOT_FOUND")


def test_queue_position_follows_claim_order(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    ids = [one_shot(api, f"k{i}")["execution"]["execution_id"] for i in range(3)]
    now = datetime.now(UTC)
    f.set_execution(database, ids[0], run_at=now - timedelta(seconds=10))
    f.set_execution(database, ids[1], run_at=now - timedelta(seconds=30))
    f.set_execution(database, ids[2], run_at=now - timedelta(seconds=20))
    positions = [api.get(f"/executions/{i}").body["queue_position"] for i in ids]
    assert positions == [3, 1, 2]
    # A RETRYING row due earlier is claimable too and counts ahead of the QUEUED ones.
    other = one_shot(api, "retry")["execution"]["execution_id"]
    f.set_execution(database, other, status="RETRYING", run_at=now - timedelta(minutes=5))
    assert api.get(f"/executions/{ids[1]}").body["queue_position"] == 2
    # Not yet due, or not claimable: does not count.
    f.set_execution(database, other, run_at=now + timedelta(minutes=5))
    assert api.get(f"/executions/{ids[1]}").body["queue_position"] == 1
    assert api.get(f"/executions/{other}").body["queue_position"] is None


@pytest.mark.parametrize("status", ["PENDING", "QUEUED", "RETRYING"])
def test_cancel_execution(api: ApiClient, database: Database, endpoint: str, status: str) -> None:
    execution_id = one_shot(api)["execution"]["execution_id"]
    f.set_execution(database, execution_id, status=status, attempt_count=1)
    reply = api.post(f"/executions/{execution_id}/cancel")
    assert reply.status == 200
    assert reply.body["status"] == "CANCELLED"
    assert reply.body["queue_position"] is None
    logs = api.get(f"/executions/{execution_id}/logs").body["items"]
    assert (logs[-1]["message"], logs[-1]["attempt_number"]) == (
        "Execution cancelled by API request.",
        1,
    )


@pytest.mark.parametrize("status", ["RUNNING", "SUCCESS", "FAILED"])
def test_cancel_execution_refused(
    api: ApiClient, database: Database, endpoint: str, status: str
) -> None:
    execution_id = one_shot(api)["execution"]["execution_id"]
    f.set_execution(database, execution_id, status=status)
    reply = api.post(f"/executions/{execution_id}/cancel")
    assert (reply.status, reply.error_code) == (409, "EXECUTION_NOT_CANCELLABLE")
    assert api.get(f"/executions/{execution_id}").body["status"] == status
    assert len(api.get(f"/executions/{execution_id}/logs").body["items"]) == 1


def test_cancelling_a_cancelled_execution_again_answers_its_current_state(
    api: ApiClient, endpoint: str
) -> None:
    execution_id = one_shot(api)["execution"]["execution_id"]
    first = api.post(f"/executions/{execution_id}/cancel")
    assert (first.status, first.body["status"]) == (200, "CANCELLED")
    again = api.post(f"/executions/{execution_id}/cancel")
    assert again.status == 200, again.body
    assert again.body == first.body
    # No second transition and no second log line.
    assert len(api.get(f"/executions/{execution_id}/logs").body["items"]) == 2


def test_cancel_unknown_execution_is_404(api: ApiClient) -> None:
    reply = api.post("/executions/exec_missing/cancel")
    assert (reply.status, reply.error_code) == (404, "EXECUTION_NOT_FOUND")


def test_attempts_by_number_with_pagination(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    execution_id = one_shot(api)["execution"]["execution_id"]
    # Inserted out of order: the list still goes by attempt_number.
    for number, status in ((2, "FAILED"), (1, "FAILED"), (3, "SUCCESS")):
        f.add_attempt(database, execution_id, number, status)
    first = api.get(f"/executions/{execution_id}/attempts?limit=2").body
    assert [a["attempt_number"] for a in first["items"]] == [1, 2]
    assert first["items"][0]["attempt_id"].startswith("att_")
    assert first["items"][0]["error"] == {"type": "TIMEOUT", "message": "t"}
    rest = api.get(f"/executions/{execution_id}/attempts?limit=2&cursor={first['cursor']}").body
    assert [a["attempt_number"] for a in rest["items"]] == [3]
    assert rest["items"][0]["output"] == {"status_code": 200}
    assert rest["cursor"] is None
    missing = api.get("/executions/exec_missing/attempts")
    assert (missing.status, missing.error_code) == (404, "EXECUTION_NOT_FOUND")


def test_logs_oldest_first_with_pagination(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    execution_id = one_shot(api)["execution"]["execution_id"]
    later = datetime.now(UTC) + timedelta(seconds=5)
    for i in (3, 1, 2):
        f.add_log(database, execution_id, f"line {i}", later + timedelta(seconds=i))
    first = api.get(f"/executions/{execution_id}/logs?limit=2").body
    assert [log["message"] for log in first["items"]][1] == "line 1"
    assert first["items"][0]["log_id"].startswith("log_")
    rest = api.get(f"/executions/{execution_id}/logs?limit=2&cursor={first['cursor']}").body
    assert [log["message"] for log in rest["items"]] == ["line 2", "line 3"]
    assert rest["cursor"] is None
    missing = api.get("/executions/exec_missing/logs")
    assert (missing.status, missing.error_code) == (404, "EXECUTION_NOT_FOUND")


def test_job_executions_filter_and_pagination(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    job = api.post(
        "/jobs",
        {
            "endpoint": EP,
            "trigger": "CRON",
            "cron": "* * * * *",
            "timezone": "UTC",
            "input": {"user_id": "u"},
        },
    ).body
    now = datetime.now(UTC)
    made = [
        f.add_execution(database, job["job_id"], status=s, created_at=now - timedelta(minutes=m))
        for m, s in ((3, "SUCCESS"), (2, "FAILED"), (1, "SUCCESS"))
    ]
    everything = api.get(f"/jobs/{job['job_id']}/executions").body
    assert [e["execution_id"] for e in everything["items"]] == list(reversed(made))
    assert "queue_position" not in everything["items"][0]
    succeeded = api.get(f"/jobs/{job['job_id']}/executions?status=SUCCESS").body["items"]
    assert [e["execution_id"] for e in succeeded] == [made[2], made[0]]
    page = api.get(f"/jobs/{job['job_id']}/executions?limit=2").body
    rest = api.get(f"/jobs/{job['job_id']}/executions?limit=2&cursor={page['cursor']}").body
    assert [e["execution_id"] for e in page["items"] + rest["items"]] == list(reversed(made))
    bad = api.get(f"/jobs/{job['job_id']}/executions?status=DONE")
    assert (bad.status, bad.error_code) == (400, "INVALID_REQUEST")
    missing = api.get("/jobs/job_missing/executions")
    assert (missing.status, missing.error_code) == (404, "JOB_NOT_FOUND")


# -- long-polling -------------------------------------------------------------------------


def finish_soon(database: Database, execution_id: str, started: threading.Event) -> None:
    """Another party (a worker) finishes the execution while the request waits.

    The pause only makes it likely that the request has started polling; the assertions do
    not depend on it.
    """
    started.wait(5)
    time.sleep(0.5)  # the scenario: let the request start polling (see the docstring)
    f.set_execution(database, execution_id, status="SUCCESS", duration_ms=7)


def test_long_poll_returns_as_soon_as_terminal(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    execution_id = one_shot(api)["execution"]["execution_id"]
    polling = threading.Event()
    worker = threading.Thread(target=finish_soon, args=(database, execution_id, polling))
    worker.start()
    polling.set()
    reply = api.get(f"/executions/{execution_id}", headers={"prefer": "wait=20"})
    worker.join()
    assert reply.status == 200
    assert reply.body["status"] == "SUCCESS"
    assert reply.headers["preference-applied"] == "wait=20"


def test_long_poll_on_job_waits_for_its_execution(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    job = one_shot(api)
    polling = threading.Event()
    worker = threading.Thread(
        target=finish_soon, args=(database, job["execution"]["execution_id"], polling)
    )
    worker.start()
    polling.set()
    reply = api.get(f"/jobs/{job['job_id']}", headers={"prefer": "wait=20"})
    worker.join()
    assert reply.body["execution"]["status"] == "SUCCESS"
    assert reply.headers["preference-applied"] == "wait=20"


def test_long_poll_times_out_with_the_current_state(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    job = one_shot(api)
    reply = api.get(f"/executions/{job['execution']['execution_id']}", headers={"prefer": "wait=1"})
    assert reply.status == 200
    assert reply.body["status"] == "QUEUED"
    assert reply.headers["preference-applied"] == "wait=1"


def test_wait_is_capped_and_bad_preferences_are_ignored(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    execution_id = one_shot(api)["execution"]["execution_id"]
    f.set_execution(database, execution_id, status="FAILED")
    capped = api.get(f"/executions/{execution_id}", headers={"prefer": "wait=600"})
    assert capped.headers["preference-applied"] == "wait=25"  # terminal: answered at once
    for header in ("wait=soon", "wait=-3", "return=minimal"):
        reply = api.get(f"/executions/{execution_id}", headers={"prefer": header})
        assert reply.status == 200
        assert "preference-applied" not in reply.headers
    assert "preference-applied" not in api.get(f"/executions/{execution_id}").headers


def test_service_long_poll_times_out_on_the_injected_clock(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    job = one_shot(api)
    clock = FakeClock()
    poller = Poller(sleep=clock.sleep, monotonic=clock.monotonic, interval=0.2)
    detail = ExecutionService(database, poller).get(job["execution"]["execution_id"], wait=3)
    assert detail.status == "QUEUED"
    assert sum(clock.sleeps) == pytest.approx(3.0)
    view = JobService(database, lambda: datetime.now(UTC), poller).get(job["job_id"], wait=2)
    assert view.execution is not None and view.execution.status == "QUEUED"


def test_service_long_poll_sees_a_change_between_sleeps(
    api: ApiClient, db_url: str, endpoint: str
) -> None:
    execution_id = one_shot(api)["execution"]["execution_id"]
    clock = FakeClock()
    # One connection only: if the poll held it while sleeping, the write below could not run.
    single = Database.from_url(db_url, pool_size=1)

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        if len(clock.sleeps) == 3:
            f.set_execution(single, execution_id, status="CANCELLED")

    poller = Poller(sleep=sleep, monotonic=clock.monotonic, interval=0.2)
    try:
        detail = ExecutionService(single, poller).get(execution_id, wait=25)
    finally:
        single.close()
    assert detail.status == "CANCELLED"
    assert len(clock.sleeps) == 3
