"""PUT /jobs/{id} versions, cancel, GET /jobs/{id}/status and /versions."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chalicelib.db.connection import Database
from chalicelib.services.jobs.status import JobStatusService
from tests.support.api_client import ApiClient
from tests.support.seed import jobs as f

EP = "send-welcome-email"


@pytest.fixture
def endpoint(database: Database) -> str:
    return f.welcome_endpoint(database)


def cron_job(api: ApiClient, **extra: Any) -> dict[str, Any]:
    body = {
        "endpoint": EP,
        "trigger": "CRON",
        "cron": "0 9 * * MON",
        "timezone": "Asia/Kolkata",
        "starts_at": "2030-03-16T00:00:00Z",
        "input": {"user_id": "u_abc"},
    }
    body.update(extra)
    reply = api.post("/jobs", body)
    assert reply.status == 201, reply.body
    return dict(reply.body)


def one_shot(api: ApiClient, key: str = "k", trigger: str = "IMMEDIATE") -> dict[str, Any]:
    body: dict[str, Any] = {
        "endpoint": EP,
        "trigger": trigger,
        "idempotency_key": key,
        "input": {"user_id": "u"},
    }
    if trigger == "DELAYED":
        body["run_at"] = "2030-01-01T00:00:00Z"
    return dict(api.post("/jobs", body).body)


# -- PUT ----------------------------------------------------------------------------------


def test_update_creates_version_two_and_retires_the_old_one(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    v1 = cron_job(api, ends_at="2031-01-01T00:00:00Z")
    reply = api.put(
        f"/jobs/{v1['job_id']}",
        {"cron": "0 10 * * MON", "input": {"user_id": "u_abc", "order_id": "weekly"}},
    )
    assert reply.status == 200
    v2 = reply.body
    assert v2["job_id"] != v1["job_id"] and v2["job_id"].startswith("job_")
    assert (v2["version"], v2["previous_version_id"], v2["status"]) == (2, v1["job_id"], "ACTIVE")
    assert v2["cron"] == "0 10 * * MON"
    assert v2["timezone"] == "Asia/Kolkata"  # carried over
    assert v2["starts_at"] == "2030-03-16T00:00:00Z"
    assert v2["ends_at"] == "2031-01-01T00:00:00Z"
    assert v2["next_run_at"] == "2030-03-18T10:00:00+05:30"
    assert v2["input"] == {"user_id": "u_abc", "order_id": "weekly"}

    old = api.get(f"/jobs/{v1['job_id']}").body
    assert old["status"] == "RETIRED"
    assert old["replaced_by_id"] == v2["job_id"]
    assert old["retired_at"] is not None and old["next_run_at"] is None

    v3 = api.put(f"/jobs/{v2['job_id']}", {"timezone": "Europe/Berlin", "ends_at": None}).body
    assert (v3["version"], v3["ends_at"], v3["cron"]) == (3, None, "0 10 * * MON")
    assert v3["next_run_at"] == "2030-03-18T10:00:00+01:00"

    for any_id in (v1["job_id"], v2["job_id"], v3["job_id"]):
        chain = api.get(f"/jobs/{any_id}/versions").body
        assert [job["version"] for job in chain["items"]] == [1, 2, 3]
        assert [job["status"] for job in chain["items"]] == ["RETIRED", "RETIRED", "ACTIVE"]
    first_page = api.get(f"/jobs/{v2['job_id']}/versions?limit=2").body
    assert [job["version"] for job in first_page["items"]] == [1, 2]
    rest = api.get(f"/jobs/{v2['job_id']}/versions?limit=2&cursor={first_page['cursor']}").body
    assert [job["version"] for job in rest["items"]] == [3] and rest["cursor"] is None


def test_update_revalidates_input(api: ApiClient, endpoint: str) -> None:
    v1 = cron_job(api)
    reply = api.put(f"/jobs/{v1['job_id']}", {"input": {"order_id": "no user"}})
    assert (reply.status, reply.error_code) == (422, "INPUT_VALIDATION_FAILED")
    assert api.get(f"/jobs/{v1['job_id']}").body["status"] == "ACTIVE"


@pytest.mark.parametrize(
    "body,status,code",
    [
        ({"cron": "every monday"}, 422, "INVALID_CRON"),
        ({"timezone": "Moon/Base"}, 400, "INVALID_REQUEST"),
        ({"trigger": "IMMEDIATE"}, 400, "INVALID_REQUEST"),
        ({}, 400, "INVALID_REQUEST"),
        ({"ends_at": "2029-01-01T00:00:00Z"}, 400, "INVALID_REQUEST"),
    ],
)
def test_update_field_rules(
    api: ApiClient, endpoint: str, body: dict[str, Any], status: int, code: str
) -> None:
    v1 = cron_job(api)
    reply = api.put(f"/jobs/{v1['job_id']}", body)
    assert (reply.status, reply.error_code) == (status, code)


def test_one_shot_and_retired_jobs_are_not_updatable(api: ApiClient, endpoint: str) -> None:
    job = one_shot(api, key="IMMEDIATE", trigger="IMMEDIATE")
    reply = api.put(f"/jobs/{job['job_id']}", {"cron": "* * * * *"})
    assert (reply.status, reply.error_code) == (409, "JOB_NOT_UPDATABLE")
    # A DELAYED job is only rescheduled (test_api_jobs_timing.py): a schedule is refused.
    job = one_shot(api, key="DELAYED", trigger="DELAYED")
    reply = api.put(f"/jobs/{job['job_id']}", {"cron": "* * * * *"})
    assert (reply.status, reply.error_code) == (400, "INVALID_REQUEST")
    assert "of a DELAYED job: cron." in reply.body["error"]["message"]
    v1 = cron_job(api)
    v2 = api.put(f"/jobs/{v1['job_id']}", {"cron": "0 10 * * *"}).body
    again = api.put(f"/jobs/{v1['job_id']}", {"cron": "0 11 * * *"})
    assert (again.status, again.error_code) == (409, "JOB_NOT_UPDATABLE")
    assert v2["job_id"] in again.body["error"]["message"]
    api.post(f"/jobs/{v2['job_id']}/cancel")
    cancelled = api.put(f"/jobs/{v2['job_id']}", {"cron": "0 11 * * *"})
    assert (cancelled.status, cancelled.error_code) == (409, "JOB_NOT_UPDATABLE")
    missing = api.put("/jobs/job_missing", {"cron": "* * * * *"})
    assert (missing.status, missing.error_code) == (404, "JOB_NOT_FOUND")


def test_versions_of_unknown_job_is_404(api: ApiClient) -> None:
    reply = api.get("/jobs/job_missing/versions")
    assert (reply.status, reply.error_code) == (404, "JOB_NOT_FOUND")


# -- cancel -------------------------------------------------------------------------------


def test_cancel_cron_retires_it_and_in_flight_runs_continue(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    job = cron_job(api)
    running = f.add_execution(
        database, job["job_id"], status="RUNNING", created_at=datetime.now(UTC)
    )
    reply = api.post(f"/jobs/{job['job_id']}/cancel")
    assert reply.status == 200
    assert (reply.body["status"], reply.body["next_run_at"]) == ("RETIRED", None)
    assert reply.body["latest_execution"]["execution_id"] == running
    assert api.get(f"/executions/{running}").body["status"] == "RUNNING"
    # RETIRED rows are outside the materializer's index: no further ticks.
    due = database.run(
        "SELECT count(*) AS n FROM jobs WHERE trigger_type = 'CRON' AND status = 'ACTIVE'"
    )
    assert due[0]["n"] == 0
    # Cancel is idempotent: a retired job answers 200 with its current state, unchanged.
    again = api.post(f"/jobs/{job['job_id']}/cancel")
    assert again.status == 200, again.body
    assert (again.body["status"], again.body["retired_at"]) == ("RETIRED", reply.body["retired_at"])


def _ticks_ahead_and_due(database: Database, job_id: str) -> tuple[str, str]:
    """A tick the scheduler materialized ahead of time (QUEUED, run_at in the future) and
    one that is due (QUEUED, run_at passed)."""
    now = datetime.now(UTC)
    ahead = f.add_execution(
        database, job_id, status="QUEUED", created_at=now, run_at=now + timedelta(hours=1)
    )
    due = f.add_execution(
        database, job_id, status="QUEUED", created_at=now, run_at=now - timedelta(seconds=1)
    )
    return ahead, due


def _messages(api: ApiClient, execution_id: str) -> list[str]:
    return [log["message"] for log in api.get(f"/executions/{execution_id}/logs").body["items"]]


def test_cancel_cron_cancels_a_tick_materialized_ahead_but_not_a_due_one(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    job = cron_job(api)
    ahead, due = _ticks_ahead_and_due(database, job["job_id"])
    assert api.post(f"/jobs/{job['job_id']}/cancel").status == 200
    cancelled = api.get(f"/executions/{ahead}").body
    assert cancelled["status"] == "CANCELLED" and cancelled["completed_at"] is not None
    assert _messages(api, ahead) == ["Job retired before this tick; execution CANCELLED."]
    assert api.get(f"/executions/{due}").body["status"] == "QUEUED"
    assert _messages(api, due) == []


def test_update_cancels_the_old_versions_tick_materialized_ahead(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    v1 = cron_job(api)
    ahead, due = _ticks_ahead_and_due(database, v1["job_id"])
    reply = api.put(f"/jobs/{v1['job_id']}", {"cron": "0 10 * * MON"})
    assert reply.status == 200, reply.body
    assert api.get(f"/executions/{ahead}").body["status"] == "CANCELLED"
    assert _messages(api, ahead) == [
        "Job replaced by a new version before this tick; execution CANCELLED."
    ]
    assert api.get(f"/executions/{due}").body["status"] == "QUEUED"


@pytest.mark.parametrize("status", ["PENDING", "QUEUED", "RETRYING"])
def test_cancel_one_shot_in_a_cancellable_status(
    api: ApiClient, database: Database, endpoint: str, status: str
) -> None:
    job = one_shot(api)
    execution_id = job["execution"]["execution_id"]
    f.set_execution(database, execution_id, status=status)
    reply = api.post(f"/jobs/{job['job_id']}/cancel")
    assert reply.status == 200
    assert reply.body["status"] == "RETIRED"
    assert reply.body["execution"]["status"] == "CANCELLED"
    execution = api.get(f"/executions/{execution_id}").body
    assert execution["status"] == "CANCELLED" and execution["completed_at"] is not None
    logs = api.get(f"/executions/{execution_id}/logs").body["items"]
    assert [log["message"] for log in logs][-1] == "Execution cancelled by API request."


@pytest.mark.parametrize(
    ("status", "job_status"), [("RUNNING", "ACTIVE"), ("SUCCESS", "RETIRED"), ("FAILED", "RETIRED")]
)
def test_cancel_one_shot_refused_when_running_or_finished(
    api: ApiClient, database: Database, endpoint: str, status: str, job_status: str
) -> None:
    job = one_shot(api)
    execution_id = job["execution"]["execution_id"]
    f.set_execution(database, execution_id, status=status)
    reply = api.post(f"/jobs/{job['job_id']}/cancel")
    assert (reply.status, reply.error_code) == (409, "EXECUTION_NOT_CANCELLABLE")
    assert status in reply.body["error"]["message"]
    # Nothing moved, and no log line was added. The job's status is its execution's.
    assert api.get(f"/executions/{execution_id}").body["status"] == status
    assert api.get(f"/jobs/{job['job_id']}").body["status"] == job_status
    assert len(api.get(f"/executions/{execution_id}/logs").body["items"]) == 1


def test_cancel_one_shot_twice_answers_its_current_state(api: ApiClient, endpoint: str) -> None:
    job = one_shot(api)
    first = api.post(f"/jobs/{job['job_id']}/cancel")
    assert (first.status, first.body["status"]) == (200, "RETIRED")
    assert first.body["execution"]["status"] == "CANCELLED"
    again = api.post(f"/jobs/{job['job_id']}/cancel")
    assert again.status == 200, again.body
    assert again.body == first.body
    execution_id = job["execution"]["execution_id"]
    assert len(api.get(f"/executions/{execution_id}/logs").body["items"]) == 2


def test_cancel_unknown_job_is_404(api: ApiClient) -> None:
    reply = api.post("/jobs/job_missing/cancel")
    assert (reply.status, reply.error_code) == (404, "JOB_NOT_FOUND")


# -- status -------------------------------------------------------------------------------


def seed_ticks(database: Database, job_id: str, now: datetime) -> None:
    recent = [("SUCCESS", d) for d in (100, 200, 300, 400)] + [("FAILED", 1000)]
    for minutes, (status, duration) in enumerate(recent, start=10):
        f.add_execution(
            database,
            job_id,
            status=status,
            created_at=now - timedelta(minutes=minutes),
            duration_ms=duration,
        )
    # A cron job's executions are never PENDING: ticks and runs-now are born QUEUED.
    for status in ("QUEUED", "RETRYING", "QUEUED"):
        f.add_execution(database, job_id, status=status, created_at=now - timedelta(minutes=5))
    f.add_execution(database, job_id, status="RUNNING", created_at=now - timedelta(minutes=1))
    # Outside the 24-hour window: not in stats, and its failure does not count.
    f.add_execution(
        database, job_id, status="FAILED", created_at=now - timedelta(hours=25), duration_ms=9000
    )


def test_status_reports_health_counts_and_stats(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    job = cron_job(api)
    now = datetime.now(UTC)
    seed_ticks(database, job["job_id"], now)
    database.execute(
        "UPDATE jobs SET cron_last_tick_at = :t WHERE job_id = :id",
        t=datetime(2030, 3, 11, 3, 30, tzinfo=UTC),
        id=job["job_id"],
    )
    reply = api.get(f"/jobs/{job['job_id']}/status")
    assert reply.status == 200
    body = reply.body
    assert body["health"] == "DEGRADED"  # 1 failed of 5 finished = 20 %
    assert body["trigger"] == "CRON" and body["version"] == 1
    assert body["active_executions"] == {"pending": 3, "running": 1, "total": 4}
    assert body["last_execution"]["status"] == "RUNNING"
    assert set(body["last_execution"]) == {
        "execution_id",
        "status",
        "started_at",
        "completed_at",
        "attempt_number",
    }
    assert body["cron"] == {
        "expression": "0 9 * * MON",
        "timezone": "Asia/Kolkata",
        "next_run_at": "2030-03-18T09:00:00+05:30",
        "last_tick_at": "2030-03-11T09:00:00+05:30",
    }
    # avg(100, 200, 300, 400, 1000) = 400; p99 interpolates between 400 and 1000:
    # 400 + 0.96 * 600 = 976.
    assert body["stats"]["last_24h"] == {
        "total": 9,
        "succeeded": 4,
        "failed": 1,
        "avg_duration_ms": 400,
        "p99_duration_ms": 976,
    }


def test_status_health_values(api: ApiClient, database: Database, endpoint: str) -> None:
    job = cron_job(api)
    status = api.get(f"/jobs/{job['job_id']}/status").body
    assert status["health"] == "IDLE"
    assert status["stats"]["last_24h"]["avg_duration_ms"] is None
    assert status["last_execution"] is None
    now = datetime.now(UTC)
    f.add_execution(database, job["job_id"], status="FAILED", created_at=now, duration_ms=5)
    assert api.get(f"/jobs/{job['job_id']}/status").body["health"] == "FAILING"
    for _ in range(9):
        f.add_execution(database, job["job_id"], status="SUCCESS", created_at=now, duration_ms=5)
    assert api.get(f"/jobs/{job['job_id']}/status").body["health"] == "DEGRADED"
    f.add_execution(database, job["job_id"], status="SUCCESS", created_at=now, duration_ms=5)
    assert api.get(f"/jobs/{job['job_id']}/status").body["health"] == "HEALTHY"


def test_status_window_follows_the_injected_clock(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    job = cron_job(api)
    now = datetime.now(UTC)
    seed_ticks(database, job["job_id"], now)
    later = JobStatusService(database, clock=lambda: now + timedelta(days=2))
    report = later.status(job["job_id"])
    assert report.health.value == "IDLE"
    assert report.stats.total == 0 and report.pending == 3 and report.running == 1


def test_status_of_one_shot_job_and_404(api: ApiClient, endpoint: str) -> None:
    job = one_shot(api)
    body = api.get(f"/jobs/{job['job_id']}/status").body
    assert body["cron"] is None and body["health"] == "HEALTHY"
    assert body["active_executions"] == {"pending": 1, "running": 0, "total": 1}
    missing = api.get("/jobs/job_missing/status")
    assert (missing.status, missing.error_code) == (404, "JOB_NOT_FOUND")


def test_concurrent_updates_of_one_version_make_exactly_one_successor(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    v1 = cron_job(api)
    barrier = threading.Barrier(4)
    replies: list[Any] = []

    def put(hour: int) -> None:
        barrier.wait()
        replies.append(api.put(f"/jobs/{v1['job_id']}", {"cron": f"0 {hour} * * *"}))

    threads = [threading.Thread(target=put, args=(h,)) for h in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    outcomes = sorted((r.status, r.error_code) for r in replies)
    assert outcomes == [(200, None)] + [(409, "JOB_NOT_UPDATABLE")] * 3
    winner = next(r.body for r in replies if r.status == 200)
    versions = api.get(f"/jobs/{v1['job_id']}/versions").body["items"]
    assert [v["job_id"] for v in versions] == [v1["job_id"], winner["job_id"]]
    assert database.run("SELECT count(*) AS n FROM jobs")[0]["n"] == 2
