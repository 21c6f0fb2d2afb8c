"""A DELAYED job's time: given as a ``delay`` (POST /jobs, batch items) and moved once created
(PUT /jobs/{id}), against the real promoter and claim."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chalicelib.db.connection import Database
from chalicelib.scheduler.promoter import DelayedPromoter
from chalicelib.worker.strategies import claim_strategy
from tests.integration.test_api_foundation import assert_envelope
from tests.integration.test_api_keys import make_key
from tests.support.api_client import ApiClient
from tests.support.environment import PROFILE
from tests.support.seed import jobs as f

EP = "send-welcome-email"

#: The claim decides what these tests see: make test runs them again in CockroachDB's
#: configuration (test-cockroach).
pytestmark = pytest.mark.claim_path


@pytest.fixture
def endpoint(database: Database) -> str:
    return f.welcome_endpoint(database)


def delayed(key: str = "reminder-1", **timing: Any) -> dict[str, Any]:
    return {
        "endpoint": EP,
        "trigger": "DELAYED",
        "idempotency_key": key,
        "input": {"user_id": "u_abc"},
        **timing,
    }


def instant(text: str) -> datetime:
    return datetime.fromisoformat(text)


def execution_row(db: Database, job_id: str) -> dict[str, Any]:
    [row] = db.run(
        "SELECT execution_id, status, run_at, parked FROM executions WHERE job_id = :job_id",
        job_id=job_id,
    )
    return dict(row)


def claim(db: Database) -> list[str]:
    """Claim with the run's strategy (conditional_update in the CockroachDB pass)."""
    strategy = claim_strategy(PROFILE.get("TE_CLAIM_STRATEGY", "skip_locked"))
    return [c.execution_id for c in strategy.claim(db, "w-test", 10)]


def promote(db: Database) -> int:
    return DelayedPromoter(db, lookahead=timedelta(seconds=1)).run_once().count


# -- POST /jobs with a delay ----------------------------------------------------------------


def test_a_delay_runs_the_job_that_long_after_the_servers_time(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    before = datetime.now(UTC)
    reply = api.post("/jobs", delayed(delay="1h30m"))
    after = datetime.now(UTC)
    assert reply.status == 201, reply.body
    run_at = instant(reply.body["run_at"])
    assert (
        before + timedelta(hours=1, minutes=30) <= run_at <= after + timedelta(hours=1, minutes=30)
    )
    assert reply.body["execution"]["status"] == "PENDING"
    assert "delay" not in reply.body
    assert execution_row(database, reply.body["job_id"])["run_at"] == run_at


@pytest.mark.parametrize(
    ("delay", "seconds"),
    [("250ms", 0.25), ("90s", 90), ("15m", 900), ("2d", 172800)],
)
def test_each_unit_of_a_delay(api: ApiClient, endpoint: str, delay: str, seconds: float) -> None:
    before = datetime.now(UTC)
    reply = api.post("/jobs", delayed(f"k-{delay}", delay=delay))
    assert reply.status == 201, reply.body
    moved = instant(reply.body["run_at"]) - before
    assert timedelta(seconds=seconds) <= moved < timedelta(seconds=seconds + 60)


@pytest.mark.parametrize(
    ("timing", "fragment"),
    [
        (
            {"delay": "90s", "run_at": "2030-01-01T00:00:00Z"},
            "Fields 'run_at' and 'delay' exclude each other",
        ),
        ({"delay": "0s"}, "Field 'delay' must be a positive duration"),
        ({"delay": "-5s"}, "Field 'delay' must be a duration such as"),
        ({"delay": "90"}, "Field 'delay' must be a duration such as"),
        ({"delay": "1.5h"}, "Field 'delay' must be a duration such as"),
        ({"delay": "30m1h"}, "Field 'delay' must be a duration such as"),
        ({"delay": 90}, "Field 'delay' must be a duration such as"),
        ({"delay": "2920000d"}, "Field 'delay' puts run_at past 9999-01-01T00:00:00Z"),
        ({"delay": "999999999999d"}, "Field 'delay' is longer than the range"),
        ({}, "Missing required field: run_at (or delay)."),
    ],
)
def test_a_bad_delay_is_400_naming_the_field(
    api: ApiClient, endpoint: str, timing: dict[str, Any], fragment: str
) -> None:
    reply = api.post("/jobs", delayed(**timing))
    assert_envelope(reply, 400, "INVALID_REQUEST")
    assert fragment in reply.body["error"]["message"]


def test_a_delay_is_refused_on_an_immediate_job(api: ApiClient, endpoint: str) -> None:
    reply = api.post("/jobs", {**delayed(delay="90s"), "trigger": "IMMEDIATE"})
    assert_envelope(reply, 400, "INVALID_REQUEST")
    assert "Unknown field(s) for IMMEDIATE jobs: delay." in reply.body["error"]["message"]


def test_batch_items_take_a_delay_and_a_bad_one_names_its_item(
    api: ApiClient, endpoint: str
) -> None:
    before = datetime.now(UTC)
    reply = api.post("/jobs/batch", {"jobs": [delayed("b-1", delay="15m")]})
    assert reply.status == 200, reply.body
    [item] = reply.body["items"]
    assert item["status"] == 201
    assert instant(item["job"]["run_at"]) - before >= timedelta(minutes=15)
    bad = api.post("/jobs/batch", {"jobs": [delayed("b-2", delay="15x")]})
    [refused] = bad.body["items"]
    assert refused["status"] == 400 and refused["error"]["code"] == "INVALID_REQUEST"
    assert "Field 'delay' must be a duration such as" in refused["error"]["message"]


# -- PUT /jobs/{id}: reschedule ---------------------------------------------------------


def test_reschedule_moves_the_job_and_its_execution_and_records_a_version(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    created = api.post("/jobs", delayed(run_at="2030-03-15T18:00:00Z")).body
    job_id = created["job_id"]
    reply = api.put(f"/jobs/{job_id}", {"run_at": "2031-01-02T03:04:05Z"})
    assert reply.status == 200, reply.body
    body = reply.body
    assert (body["job_id"], body["version"], body["status"]) == (job_id, 2, "ACTIVE")
    assert body["run_at"] == "2031-01-02T03:04:05Z"
    assert body["execution"]["execution_id"] == created["execution"]["execution_id"]
    assert body["execution"]["status"] == "PENDING"
    assert execution_row(database, job_id)["run_at"] == instant("2031-01-02T03:04:05+00:00")
    assert body["idempotency_key"] == "reminder-1"
    assert api.get(f"/jobs/{job_id}").body["run_at"] == "2031-01-02T03:04:05Z"
    versions = api.get(f"/jobs/{job_id}/versions").body["items"]
    assert [(v["version"], v["status"], v["run_at"]) for v in versions] == [
        (1, "RETIRED", "2030-03-15T18:00:00Z"),
        (2, "ACTIVE", "2031-01-02T03:04:05Z"),
    ]
    assert versions[0]["replaced_by_id"] == job_id
    assert versions[1]["previous_version_id"] == versions[0]["job_id"]
    logs = api.get(f"/executions/{body['execution']['execution_id']}/logs").body["items"]
    assert any(
        "Rescheduled: run_at moved from 2030-03-15T18:00:00Z to 2031-01-02T03:04:05Z"
        in line["message"]
        for line in logs
    )
    # The key still names the job (a repeat answers it), and a second move adds a version.
    assert api.post("/jobs", delayed(run_at="2040-01-01T00:00:00Z")).body["job_id"] == job_id
    again = api.put(f"/jobs/{job_id}", {"delay": "2h"})
    assert again.status == 200 and again.body["version"] == 3
    chain = api.get(f"/jobs/{versions[0]['job_id']}/versions").body["items"]
    assert [v["version"] for v in chain] == [1, 2, 3]


def test_reschedule_with_a_delay_counts_from_the_servers_time(
    api: ApiClient, endpoint: str
) -> None:
    job_id = api.post("/jobs", delayed(run_at="2030-03-15T18:00:00Z")).body["job_id"]
    before = datetime.now(UTC)
    reply = api.put(f"/jobs/{job_id}", {"delay": "90s"})
    assert reply.status == 200, reply.body
    moved = instant(reply.body["run_at"]) - before
    assert timedelta(seconds=90) <= moved < timedelta(seconds=150)


def test_a_due_queued_execution_moved_later_never_fires_at_its_old_time(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    """The promoter has queued it and it is due: moved, no claim takes it, and the promoter
    leaves it until its new time."""
    past = (datetime.now(UTC) - timedelta(seconds=5)).isoformat()
    job_id = api.post("/jobs", delayed(run_at=past)).body["job_id"]
    assert promote(database) == 1
    assert execution_row(database, job_id)["status"] == "QUEUED"
    reply = api.put(f"/jobs/{job_id}", {"delay": "1h"})
    assert reply.status == 200, reply.body
    assert claim(database) == []
    assert promote(database) == 0
    row = execution_row(database, job_id)
    assert (row["status"], row["run_at"]) == ("PENDING", instant(reply.body["run_at"]))


def test_a_move_to_now_is_promoted_and_claimed(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    job_id = api.post("/jobs", delayed(run_at="2030-03-15T18:00:00Z")).body["job_id"]
    now = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
    execution_id = api.put(f"/jobs/{job_id}", {"run_at": now}).body["execution"]["execution_id"]
    assert promote(database) == 1
    assert claim(database) == [execution_id]


def test_a_claimed_execution_cannot_be_moved(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    past = (datetime.now(UTC) - timedelta(seconds=5)).isoformat()
    created = api.post("/jobs", delayed(run_at=past)).body
    promote(database)
    assert claim(database) == [created["execution"]["execution_id"]]
    reply = api.put(f"/jobs/{created['job_id']}", {"delay": "1h"})
    assert_envelope(reply, 409, "INVALID_TRANSITION")
    message = reply.body["error"]["message"]
    assert "cannot be rescheduled" in message and "is RUNNING" in message
    versions = api.get(f"/jobs/{created['job_id']}/versions").body["items"]
    assert [v["version"] for v in versions] == [1]  # nothing was written


def test_an_ended_execution_cannot_be_moved(api: ApiClient, endpoint: str) -> None:
    job_id = api.post("/jobs", delayed(run_at="2030-03-15T18:00:00Z")).body["job_id"]
    assert api.post(f"/jobs/{job_id}/cancel").status == 200
    reply = api.put(f"/jobs/{job_id}", {"delay": "1h"})
    assert_envelope(reply, 409, "INVALID_TRANSITION")
    assert "is CANCELLED" in reply.body["error"]["message"]


def test_a_move_racing_the_claim_either_moves_it_or_loses_to_the_claim(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    """Each round: a due QUEUED execution, a claim and a move at once. Exactly one wins:
    claimed (the move answers 409) or moved (nothing claimed, PENDING at the new time)."""
    for round_ in range(6):
        past = (datetime.now(UTC) - timedelta(seconds=5)).isoformat()
        job_id = api.post("/jobs", delayed(f"race-{round_}", run_at=past)).body["job_id"]
        promote(database)
        start = threading.Barrier(2)
        claimed: list[str] = []

        def take(start: threading.Barrier, claimed: list[str]) -> None:
            start.wait()
            claimed.extend(claim(database))

        worker = threading.Thread(target=take, args=(start, claimed))
        worker.start()
        start.wait()
        reply = api.put(f"/jobs/{job_id}", {"delay": "1h"})
        worker.join()
        row = execution_row(database, job_id)
        if claimed:
            assert reply.status == 409 and reply.body["error"]["code"] == "INVALID_TRANSITION"
            assert row["status"] == "RUNNING"
        else:
            assert reply.status == 200, reply.body
            assert row["status"] == "PENDING" and row["run_at"] > datetime.now(UTC)
            assert claim(database) == []
        database.run(
            "UPDATE executions SET status = 'CANCELLED', completed_at = now() WHERE job_id = :j",
            j=job_id,
        )


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({}, "Missing required field: run_at (or delay)."),
        ({"delay": "soon"}, "Field 'delay' must be a duration such as"),
        ({"delay": "0ms"}, "Field 'delay' must be a positive duration"),
        ({"run_at": "tomorrow"}, "Field 'run_at' is not an ISO 8601 timestamp"),
        ({"run_at": "2030-01-01T00:00:00Z", "delay": "1h"}, "exclude each other"),
        ({"input": {"user_id": "x"}}, "Unknown field(s) for PUT /jobs/{job_id} of a DELAYED job"),
    ],
)
def test_a_bad_reschedule_body_is_400(
    api: ApiClient, endpoint: str, body: dict[str, Any], fragment: str
) -> None:
    job_id = api.post("/jobs", delayed(run_at="2030-03-15T18:00:00Z")).body["job_id"]
    reply = api.put(f"/jobs/{job_id}", body)
    assert_envelope(reply, 400, "INVALID_REQUEST")
    assert fragment in reply.body["error"]["message"]


def test_reschedule_of_an_unknown_job_is_404(api: ApiClient, endpoint: str) -> None:
    reply = api.put("/jobs/job_missing", {"delay": "1h"})
    assert_envelope(reply, 404, "JOB_NOT_FOUND")
    assert "job_missing" in reply.body["error"]["message"]


def test_an_immediate_job_is_not_rescheduled(api: ApiClient, endpoint: str) -> None:
    job = api.post("/jobs", {**delayed("now-1"), "trigger": "IMMEDIATE"}).body
    reply = api.put(f"/jobs/{job['job_id']}", {"delay": "1h"})
    assert_envelope(reply, 409, "JOB_NOT_UPDATABLE")
    assert "is a IMMEDIATE job" in reply.body["error"]["message"]


def test_a_cron_job_takes_no_run_at(api: ApiClient, endpoint: str) -> None:
    job = api.post(
        "/jobs",
        {
            "endpoint": EP,
            "trigger": "CRON",
            "cron": "0 9 * * *",
            "timezone": "UTC",
            "input": {"user_id": "u_abc"},
        },
    ).body
    reply = api.put(f"/jobs/{job['job_id']}", {"delay": "1h"})
    assert_envelope(reply, 400, "INVALID_REQUEST")
    assert "Unknown field(s) for PUT /jobs/{job_id}: delay." in reply.body["error"]["message"]


def test_an_earlier_version_is_not_rescheduled_nor_cancelled(api: ApiClient, endpoint: str) -> None:
    job_id = api.post("/jobs", delayed(run_at="2030-03-15T18:00:00Z")).body["job_id"]
    api.put(f"/jobs/{job_id}", {"delay": "1h"})
    [first, _] = api.get(f"/jobs/{job_id}/versions").body["items"]
    reply = api.put(f"/jobs/{first['job_id']}", {"delay": "2h"})
    assert_envelope(reply, 409, "JOB_NOT_UPDATABLE")
    assert f"replaced by version '{job_id}'" in reply.body["error"]["message"]
    cancelled = api.post(f"/jobs/{first['job_id']}/cancel")
    assert cancelled.status == 200 and cancelled.body["status"] == "RETIRED"
    assert api.get(f"/jobs/{job_id}").body["execution"]["status"] == "PENDING"


def test_a_read_key_may_not_reschedule(api: ApiClient, endpoint: str) -> None:
    job_id = api.post("/jobs", delayed(run_at="2030-03-15T18:00:00Z")).body["job_id"]
    api.key = make_key(api, "reader", "read")
    reply = api.put(f"/jobs/{job_id}", {"delay": "1h"})
    assert_envelope(reply, 403, "INSUFFICIENT_SCOPE")


# -- GET /jobs?endpoint=&idempotency_key= -------------------------------------------------


def test_a_job_is_found_by_its_endpoint_and_idempotency_key(api: ApiClient, endpoint: str) -> None:
    created = api.post("/jobs", delayed("order-77", run_at="2030-03-15T18:00:00Z")).body
    api.post("/jobs", delayed("order-78", run_at="2030-03-15T18:00:00Z"))
    reply = api.get(f"/jobs?endpoint={EP}&idempotency_key=order-77")
    assert reply.status == 200, reply.body
    assert [job["job_id"] for job in reply.body["items"]] == [created["job_id"]]
    assert (
        reply.body["items"][0]["execution"]["execution_id"]
        == (created["execution"]["execution_id"])
    )
    assert reply.body["cursor"] is None
    # Rescheduled, the key still names the job (its earlier version holds no key).
    api.put(f"/jobs/{created['job_id']}", {"delay": "1h"})
    again = api.get(f"/jobs?endpoint={EP}&idempotency_key=order-77").body["items"]
    assert [(job["job_id"], job["version"]) for job in again] == [(created["job_id"], 2)]


def test_an_unknown_key_lists_nothing_and_filters_apply_to_the_one_found(
    api: ApiClient, endpoint: str
) -> None:
    api.post("/jobs", delayed("order-79", run_at="2030-03-15T18:00:00Z"))
    assert api.get(f"/jobs?endpoint={EP}&idempotency_key=nope").body == {
        "items": [],
        "cursor": None,
    }
    assert api.get("/jobs?endpoint=other&idempotency_key=order-79").body["items"] == []
    path = f"/jobs?endpoint={EP}&idempotency_key=order-79"
    assert len(api.get(path + "&trigger=DELAYED&status=ACTIVE").body["items"]) == 1
    assert api.get(path + "&trigger=IMMEDIATE").body["items"] == []
    assert api.get(path + "&status=RETIRED").body["items"] == []


@pytest.mark.parametrize(
    ("query", "fragment"),
    [
        ("idempotency_key=order-1", "idempotency_key needs endpoint"),
        (f"endpoint={EP}&idempotency_key=", "idempotency_key must be a non-empty key"),
        (f"endpoint={EP}&idempotency_key=" + "k" * 256, "at most 255 characters"),
    ],
)
def test_a_bad_key_lookup_is_400(api: ApiClient, endpoint: str, query: str, fragment: str) -> None:
    reply = api.get(f"/jobs?{query}")
    assert_envelope(reply, 400, "INVALID_REQUEST")
    assert fragment in reply.body["error"]["message"]
