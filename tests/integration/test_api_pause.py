"""Pause and resume through the API, and flow_control in endpoint
definitions: the JSON every endpoint and job carries, idempotency, the 404/409
errors, and what a paused cron job's materializer and resume do."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chalicelib.db.connection import Database
from chalicelib.scheduler.materializer import CronMaterializer
from tests.integration.test_api_jobs_lifecycle import EP, cron_job, one_shot
from tests.support.api_client import ApiClient
from tests.support.seed import jobs as f

HOOK: dict[str, Any] = {
    "name": "hook",
    "type": "HTTP",
    "spec": {"url": "https://example.test/hook", "method": "POST"},
}


@pytest.fixture
def endpoint(database: Database) -> str:
    return f.welcome_endpoint(database)


# -- endpoints ----------------------------------------------------------------------------


def test_every_endpoint_json_shows_paused_at_and_held_until(api: ApiClient) -> None:
    created = api.post("/endpoints", HOOK)
    assert created.status == 201, created.body
    for body in (
        created.body,
        api.get("/endpoints/hook").body,
        api.get("/endpoints").body["items"][0],
        api.put("/endpoints/hook", HOOK).body,
    ):
        assert (body["paused_at"], body["held_until"]) == (None, None)
        assert "flow_control" not in body  # shown only when the endpoint sets it


def test_pause_and_resume_an_endpoint_idempotently(api: ApiClient) -> None:
    api.post("/endpoints", HOOK)

    first = api.post("/endpoints/hook/pause")
    second = api.post("/endpoints/hook/pause")

    assert (first.status, second.status) == (200, 200), first.body
    assert first.body["paused_at"] is not None
    assert second.body["paused_at"] == first.body["paused_at"]  # the first pause stays
    assert api.get("/endpoints/hook").body["paused_at"] == first.body["paused_at"]
    # A PUT replaces the definition, not the operator's pause.
    assert api.put("/endpoints/hook", HOOK).body["paused_at"] == first.body["paused_at"]

    resumed = api.post("/endpoints/hook/resume")
    again = api.post("/endpoints/hook/resume")
    assert (resumed.status, again.status) == (200, 200)
    assert resumed.body["paused_at"] is None and again.body["paused_at"] is None
    assert resumed.body["name"] == "hook" and resumed.body["spec"]["method"] == "POST"


def test_pause_of_an_unknown_or_deleted_endpoint_is_404(api: ApiClient) -> None:
    for verb in ("pause", "resume"):
        reply = api.post(f"/endpoints/nothing/{verb}")
        assert (reply.status, reply.error_code) == (404, "ENDPOINT_NOT_FOUND")
    api.post("/endpoints", HOOK)
    assert api.delete("/endpoints/hook").status == 204
    reply = api.post("/endpoints/hook/pause")
    assert (reply.status, reply.error_code) == (404, "ENDPOINT_NOT_FOUND")


def test_registering_a_deleted_endpoint_again_starts_it_running(
    api: ApiClient, database: Database
) -> None:
    api.post("/endpoints", HOOK)
    api.post("/endpoints/hook/pause")
    database.run("UPDATE endpoints SET held_until = now() + INTERVAL '1 hour'")
    assert api.delete("/endpoints/hook").status == 204

    revived = api.post("/endpoints", HOOK)

    assert revived.status == 201
    assert (revived.body["paused_at"], revived.body["held_until"]) == (None, None)


def test_held_until_is_shown_while_it_lies_ahead(api: ApiClient, database: Database) -> None:
    api.post("/endpoints", HOOK)
    database.run("UPDATE endpoints SET held_until = now() + INTERVAL '10 minutes'")
    shown = api.get("/endpoints/hook").body["held_until"]
    assert shown is not None and datetime.fromisoformat(shown) > datetime.now(UTC)
    # resume lifts an operator's pause, not a target's Retry-After
    assert api.post("/endpoints/hook/resume").body["held_until"] == shown
    database.run("UPDATE endpoints SET held_until = now() - INTERVAL '1 second'")
    assert api.get("/endpoints/hook").body["held_until"] is None


def test_flow_control_is_validated_echoed_and_gets_its_row(
    api: ApiClient, database: Database
) -> None:
    flow = {"rate_limit": {"limit": 100, "period_ms": 1000}, "max_concurrency": 5}
    created = api.post("/endpoints", {**HOOK, "flow_control": flow})
    assert created.status == 201, created.body
    assert created.body["flow_control"] == flow
    assert api.get("/endpoints/hook").body["flow_control"] == flow
    rows = database.run("SELECT endpoint, tokens FROM endpoint_flow")
    assert [(r["endpoint"], r["tokens"]) for r in rows] == [("hook", 100)]  # a full bucket

    only_concurrency = api.put("/endpoints/hook", {**HOOK, "flow_control": {"max_concurrency": 2}})
    assert only_concurrency.body["flow_control"] == {"max_concurrency": 2}
    cleared = api.put("/endpoints/hook", HOOK)
    assert "flow_control" not in cleared.body
    stored = database.run("SELECT flow_control FROM endpoints WHERE name = 'hook'")
    assert stored[0]["flow_control"] is None


@pytest.mark.parametrize(
    "flow",
    [
        "fast",
        {"rate": 1},
        {"rate_limit": {"limit": 0, "period_ms": 1000}},
        {"rate_limit": {"limit": 10}},
        {"rate_limit": {"limit": 10, "period_ms": 0}},
        {"rate_limit": {"limit": True, "period_ms": 1000}},
        {"rate_limit": {"limit": 10, "period_ms": 1000, "burst": 3}},
        {"max_concurrency": 0},
        {"max_concurrency": 10_001},
    ],
)
def test_bad_flow_control_is_400_and_writes_nothing(
    api: ApiClient, database: Database, flow: Any
) -> None:
    reply = api.post("/endpoints", {**HOOK, "flow_control": flow})
    assert (reply.status, reply.error_code) == (400, "INVALID_REQUEST"), reply.body
    assert "flow_control" in reply.body["error"]["message"]
    assert database.run("SELECT name FROM endpoints") == []


# -- cron jobs ------------------------------------------------------------------------------


def _job_row(database: Database, job_id: str) -> dict[str, Any]:
    return database.run(
        "SELECT cron_next_run_at, paused_at FROM jobs WHERE job_id = :id", id=job_id
    )[0]


def test_every_job_json_shows_paused_at(api: ApiClient, endpoint: str) -> None:
    job = cron_job(api)
    once = one_shot(api)
    assert job["paused_at"] is None and once["paused_at"] is None
    assert api.get(f"/jobs/{job['job_id']}").body["paused_at"] is None
    assert all("paused_at" in item for item in api.get("/jobs").body["items"])


def test_pause_and_resume_a_cron_job_idempotently(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    job = cron_job(api)
    path = f"/jobs/{job['job_id']}"

    first = api.post(f"{path}/pause")
    second = api.post(f"{path}/pause")

    assert (first.status, second.status) == (200, 200), first.body
    assert first.body["paused_at"] is not None and first.body["status"] == "ACTIVE"
    assert second.body["paused_at"] == first.body["paused_at"]
    assert api.get(path).body["paused_at"] == first.body["paused_at"]

    resumed = api.post(f"{path}/resume")
    assert resumed.status == 200 and resumed.body["paused_at"] is None
    assert api.post(f"{path}/resume").status == 200  # idempotent
    # Its first tick (2030) was never missed: the schedule did not move.
    assert resumed.body["next_run_at"] == job["next_run_at"]


def test_only_active_cron_jobs_can_be_paused(api: ApiClient, endpoint: str) -> None:
    once = one_shot(api)
    retired = cron_job(api)
    api.post(f"/jobs/{retired['job_id']}/cancel")
    for job_id in (once["job_id"], retired["job_id"]):
        for verb in ("pause", "resume"):
            reply = api.post(f"/jobs/{job_id}/{verb}")
            assert (reply.status, reply.error_code) == (409, "JOB_NOT_PAUSABLE"), reply.body
    reply = api.post("/jobs/job_missing/pause")
    assert (reply.status, reply.error_code) == (404, "JOB_NOT_FOUND")


def test_a_retired_job_shows_no_pause(api: ApiClient, endpoint: str) -> None:
    job = cron_job(api)
    api.post(f"/jobs/{job['job_id']}/pause")
    cancelled = api.post(f"/jobs/{job['job_id']}/cancel")
    assert cancelled.body["status"] == "RETIRED" and cancelled.body["paused_at"] is None


def test_resume_body_is_checked(api: ApiClient, endpoint: str) -> None:
    job = cron_job(api)
    path = f"/jobs/{job['job_id']}/resume"
    for body in ({"catch_up": "yes"}, {"catchup": True}):
        reply = api.post(path, body)
        assert (reply.status, reply.error_code) == (400, "INVALID_REQUEST"), body
    assert api.post(path, {"catch_up": False}).status == 200


def _every_minute_job(api: ApiClient, database: Database, minutes_ago: int) -> str:
    """A running every-minute cron job whose next tick lies ``minutes_ago`` in the past."""
    job = cron_job(api, cron="* * * * *", timezone="UTC", starts_at=None)
    tick = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=minutes_ago)
    database.run(
        "UPDATE jobs SET cron_next_run_at = :tick, cron_starts_at = :start WHERE job_id = :id",
        tick=tick,
        start=tick - timedelta(hours=1),
        id=job["job_id"],
    )
    return str(job["job_id"])


def _ticks(database: Database, job_id: str) -> int:
    return len(database.run("SELECT 1 FROM executions WHERE job_id = :id", id=job_id))


def test_a_paused_job_does_not_tick_and_resume_skips_the_missed_ticks(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    job_id = _every_minute_job(api, database, minutes_ago=5)
    api.post(f"/jobs/{job_id}/pause")
    materializer = CronMaterializer(database)

    materializer.run_once()
    assert _ticks(database, job_id) == 0  # five ticks due, none while paused

    before = datetime.now(UTC)
    resumed = api.post(f"/jobs/{job_id}/resume")
    next_tick = _job_row(database, job_id)["cron_next_run_at"]
    assert before <= next_tick <= before + timedelta(minutes=1)  # the first tick after now
    assert resumed.body["next_run_at"] is not None
    materializer.run_once()
    assert _ticks(database, job_id) == 0  # the missed ticks are skipped


def test_resume_with_catch_up_fires_the_missed_ticks(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    job_id = _every_minute_job(api, database, minutes_ago=4)
    api.post(f"/jobs/{job_id}/pause")
    CronMaterializer(database).run_once()
    assert _ticks(database, job_id) == 0

    assert api.post(f"/jobs/{job_id}/resume", {"catch_up": True}).status == 200
    CronMaterializer(database).run_once()
    # The four missed ticks and the current one (all due by now), one by one.
    assert _ticks(database, job_id) == 5


def test_pause_cancels_a_tick_materialized_ahead(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    job = cron_job(api, cron="0 0 1 1 *", timezone="UTC", starts_at=None)
    tick = datetime.now(UTC) + timedelta(seconds=30)  # a tick due in 30 s, then next year
    database.run(
        "UPDATE jobs SET cron_next_run_at = :tick WHERE job_id = :id", tick=tick, id=job["job_id"]
    )
    CronMaterializer(database, lookahead=timedelta(minutes=1)).run_once()
    [ahead] = database.run(
        "SELECT execution_id, status FROM executions WHERE job_id = :id", id=job["job_id"]
    )
    assert ahead["status"] == "QUEUED"

    api.post(f"/jobs/{job['job_id']}/pause")

    [row] = database.run("SELECT status FROM executions WHERE job_id = :id", id=job["job_id"])
    assert row["status"] == "CANCELLED"
    logs = api.get(f"/executions/{ahead['execution_id']}/logs").body["items"]
    assert logs[-1]["message"] == "Job paused before this tick; execution CANCELLED."


def test_a_resume_before_a_tick_the_pause_cancelled_fires_it(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    """The lean profile's scheduler materializes ticks 75 s ahead: a pause cancels such a
    tick, and a resume before it makes it the job's next tick again. It must fire (it was
    skipped: the cancelled execution held the tick's idempotency key), once, however often
    the job is paused and resumed before it."""
    job = cron_job(api, cron="* * * * *", timezone="UTC", starts_at=None)
    tick = (datetime.now(UTC) + timedelta(minutes=2)).replace(second=0, microsecond=0)
    database.run(
        "UPDATE jobs SET cron_next_run_at = :tick WHERE job_id = :id", tick=tick, id=job["job_id"]
    )
    ahead = CronMaterializer(database, lookahead=timedelta(minutes=3))
    for _ in range(2):  # materialized ahead, paused, resumed: twice over
        ahead.run_once()
        assert api.post(f"/jobs/{job['job_id']}/pause").status == 200
        resumed = api.post(f"/jobs/{job['job_id']}/resume")
        assert resumed.status == 200
        assert _job_row(database, job["job_id"])["cron_next_run_at"] <= tick
    CronMaterializer(database, lookahead=timedelta(seconds=150)).run_once()
    rows = database.run(
        "SELECT status, run_at FROM executions WHERE job_id = :id ORDER BY created_at",
        id=job["job_id"],
    )
    at_tick = [r["status"] for r in rows if r["run_at"] == tick]
    assert at_tick == ["CANCELLED", "CANCELLED", "QUEUED"], rows


def test_a_pause_after_the_due_scan_wins_over_the_tick(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    job_id = _every_minute_job(api, database, minutes_ago=1)

    def pause_now(found: str, _tick: datetime) -> None:
        assert api.post(f"/jobs/{found}/pause").status == 200

    CronMaterializer(database, before_tick=pause_now).run_once()

    assert _ticks(database, job_id) == 0


def test_trigger_runs_a_paused_job_once_and_keeps_it_paused(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    job = cron_job(api)
    api.post(f"/jobs/{job['job_id']}/pause")

    triggered = api.post(f"/jobs/{job['job_id']}/trigger")

    assert triggered.status == 201, triggered.body
    assert triggered.body["status"] == "QUEUED"
    assert api.get(f"/jobs/{job['job_id']}").body["paused_at"] is not None


def test_endpoint_pause_does_not_stop_its_cron_ticks(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    job_id = _every_minute_job(api, database, minutes_ago=0)
    assert api.post(f"/endpoints/{EP}/pause").status == 200

    CronMaterializer(database).run_once()

    assert _ticks(database, job_id) == 1  # materialized; it waits QUEUED for the resume


def test_executions_of_a_paused_endpoint_can_still_be_cancelled(
    api: ApiClient, endpoint: str
) -> None:
    job = one_shot(api)
    assert job["execution"]["status"] == "QUEUED"
    api.post(f"/endpoints/{EP}/pause")

    cancelled = api.post(f"/jobs/{job['job_id']}/cancel")

    assert cancelled.status == 200, cancelled.body
    assert cancelled.body["execution"]["status"] == "CANCELLED"
