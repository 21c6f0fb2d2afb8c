"""POST /jobs, GET /jobs, GET /jobs/{id}: creation rules, idempotency, listing."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chalicelib.db.connection import Database
from tests.support.api_client import ApiClient
from tests.support.seed import jobs as f

EP = "send-welcome-email"


@pytest.fixture
def endpoint(database: Database) -> str:
    return f.welcome_endpoint(database)


def immediate(key: str = "order-1234-welcome-email", **extra: Any) -> dict[str, Any]:
    body = {
        "endpoint": EP,
        "trigger": "IMMEDIATE",
        "idempotency_key": key,
        "input": {"user_id": "u_abc", "order_id": "order-1234"},
    }
    body.update(extra)
    return body


def test_immediate_creates_job_and_queued_execution(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    reply = api.post("/jobs", immediate())
    assert reply.status == 201
    body = reply.body
    assert list(body) == [
        "job_id",
        "endpoint",
        "endpoint_type",
        "trigger",
        "status",
        "version",
        "idempotency_key",
        "input",
        "execution",
        "concurrency_key",
        "paused_at",
        "created_at",
    ]
    assert body["job_id"].startswith("job_")
    assert (body["endpoint"], body["endpoint_type"], body["trigger"]) == (EP, "HTTP", "IMMEDIATE")
    assert (body["status"], body["version"]) == ("ACTIVE", 1)
    assert body["input"] == {"user_id": "u_abc", "order_id": "order-1234"}
    assert body["execution"]["execution_id"].startswith("exec_")
    assert body["execution"]["status"] == "QUEUED"
    assert body["created_at"].endswith("Z")
    assert reply.headers["x-request-id"].startswith("req_")
    row = database.run(
        "SELECT e.status, e.max_attempts, e.input, e.idempotency_key, e.run_at <= now() AS due,"
        " j.endpoint_snapshot, j.idempotency_key AS job_key"
        " FROM executions e JOIN jobs j USING (job_id)"
        " WHERE e.execution_id = :id",
        id=body["execution"]["execution_id"],
    )[0]
    assert row["status"] == "QUEUED" and row["due"] is True
    assert row["max_attempts"] == 3  # copied from the endpoint's retry policy
    # The job holds the key; its one execution carries none, so no write of the execution
    # adds an entry to idx_executions_cron_dedup, which dedups cron ticks only (rows.py).
    assert (row["job_key"], row["idempotency_key"]) == ("order-1234-welcome-email", None)
    assert row["endpoint_snapshot"] == {
        "name": EP,
        "type": "HTTP",
        "spec": f.HTTP_SPEC,
        "retry_policy": {
            "max_attempts": 3,
            "backoff": "exponential",
            "initial_delay_ms": 1000,
            "max_delay_ms": 30000,
        },
        "config_ref": "email-service",
        "payload_spec_ref": "welcome-input",
    }
    logs = api.get(f"/executions/{body['execution']['execution_id']}/logs").body["items"]
    assert [(log["level"], log["attempt_number"]) for log in logs] == [("INFO", 0)]
    assert "created QUEUED" in logs[0]["message"]


def test_retry_policy_defaults_apply_when_endpoint_has_none(
    api: ApiClient, database: Database
) -> None:
    f.endpoint(database, "bare")
    reply = api.post("/jobs", immediate(endpoint="bare", input={"anything": [1]}))
    assert reply.status == 201
    snapshot, max_attempts = database.run(
        "SELECT j.endpoint_snapshot, e.max_attempts FROM jobs j JOIN executions e USING (job_id)"
    )[0].values()
    assert snapshot["retry_policy"] == {
        "max_attempts": 1,
        "backoff": "exponential",
        "initial_delay_ms": 1000,
        "max_delay_ms": 60000,
    }
    assert snapshot["payload_spec_ref"] is None and snapshot["config_ref"] is None
    assert max_attempts == 1


def test_delayed_creates_pending_execution_at_run_at(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    reply = api.post(
        "/jobs",
        immediate("order-1234-reminder", trigger="DELAYED", run_at="2030-03-15T18:00:00Z"),
    )
    assert reply.status == 201
    assert reply.body["trigger"] == "DELAYED"
    assert reply.body["run_at"] == "2030-03-15T18:00:00Z"
    assert reply.body["execution"]["status"] == "PENDING"
    run_at = database.run("SELECT run_at FROM executions")[0]["run_at"]
    assert run_at == datetime(2030, 3, 15, 18, 0, tzinfo=UTC)


def test_delayed_in_the_past_is_accepted_pending_and_immediately_due(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    past = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    reply = api.post("/jobs", immediate("late", trigger="DELAYED", run_at=past))
    assert reply.status == 201
    assert reply.body["execution"]["status"] == "PENDING"
    # What the delayed promoter selects: PENDING and due now.
    due = database.run(
        "SELECT count(*) AS n FROM executions WHERE status = 'PENDING' AND run_at <= now()"
    )
    assert due[0]["n"] == 1


def test_cron_creates_job_without_execution(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    reply = api.post(
        "/jobs",
        {
            "endpoint": EP,
            "trigger": "CRON",
            "cron": "0 9 * * MON",
            "timezone": "Asia/Kolkata",
            "starts_at": "2030-03-16T00:00:00Z",
            "ends_at": None,
            "input": {"user_id": "u_abc"},
        },
    )
    assert reply.status == 201
    body = reply.body
    assert list(body) == [
        "job_id",
        "endpoint",
        "endpoint_type",
        "trigger",
        "status",
        "version",
        "cron",
        "timezone",
        "starts_at",
        "ends_at",
        "next_run_at",
        "input",
        "concurrency_key",
        "paused_at",
        "created_at",
    ]
    assert body["starts_at"] == "2030-03-16T00:00:00Z"
    assert body["ends_at"] is None
    # 2030-03-18 is the first Monday at or after starts_at.
    assert body["next_run_at"] == "2030-03-18T09:00:00+05:30"
    assert database.run("SELECT count(*) AS n FROM executions")[0]["n"] == 0
    stored = database.run("SELECT cron_next_run_at FROM jobs")[0]["cron_next_run_at"]
    assert stored == datetime(2030, 3, 18, 3, 30, tzinfo=UTC)


def test_cron_starts_at_defaults_to_now(api: ApiClient, endpoint: str) -> None:
    before = datetime.now(UTC)
    reply = api.post(
        "/jobs",
        {
            "endpoint": EP,
            "trigger": "CRON",
            "cron": "* * * * *",
            "timezone": "UTC",
            "input": {"user_id": "u"},
        },
    )
    assert reply.status == 201
    starts_at = datetime.fromisoformat(reply.body["starts_at"])
    assert starts_at >= before.replace(microsecond=0)
    assert datetime.fromisoformat(reply.body["next_run_at"]) > starts_at


@pytest.mark.parametrize(
    "starts_at,expected",
    [
        # Spring forward (2027-03-14): 02:30 does not exist, so the 14th is skipped.
        ("2027-03-14T05:00:00Z", "2027-03-15T02:30:00-04:00"),
        # Fall back (2027-11-07): 02:30 happens once, after the clocks went back.
        ("2027-11-07T05:00:00Z", "2027-11-07T02:30:00-05:00"),
    ],
)
def test_cron_next_run_at_across_new_york_dst(
    api: ApiClient, endpoint: str, starts_at: str, expected: str
) -> None:
    reply = api.post(
        "/jobs",
        {
            "endpoint": EP,
            "trigger": "CRON",
            "cron": "30 2 * * *",
            "timezone": "America/New_York",
            "starts_at": starts_at,
            "input": {"user_id": "u"},
        },
    )
    assert reply.status == 201
    assert reply.body["next_run_at"] == expected


def test_fall_back_repeated_hour_fires_once(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    reply = api.post(
        "/jobs",
        {
            "endpoint": EP,
            "trigger": "CRON",
            "cron": "30 1 * * *",
            "timezone": "America/New_York",
            "starts_at": "2027-11-07T05:45:00Z",
            "input": {"user_id": "u"},
        },
    )
    # 05:45Z is 01:45 EDT: the 01:30 EST that follows is the same wall time again, skipped.
    assert reply.body["next_run_at"] == "2027-11-08T01:30:00-05:00"


# -- errors -------------------------------------------------------------------------------


def test_unknown_endpoint_is_404(api: ApiClient) -> None:
    reply = api.post("/jobs", immediate(endpoint="nope"))
    assert (reply.status, reply.error_code) == (404, "ENDPOINT_NOT_FOUND")


def test_input_violations_are_422_with_every_path(api: ApiClient, endpoint: str) -> None:
    reply = api.post("/jobs", immediate(input={"order_id": 5, "count": -1}))
    assert (reply.status, reply.error_code) == (422, "INPUT_VALIDATION_FAILED")
    message = reply.body["error"]["message"]
    assert "(3 violations)" in message
    assert message.index("$: 'user_id'") < message.index("$.count") < message.index("$.order_id")


def test_missing_input_is_checked_against_the_spec(api: ApiClient, endpoint: str) -> None:
    body = immediate()
    del body["input"]
    reply = api.post("/jobs", body)
    assert (reply.status, reply.error_code) == (422, "INPUT_VALIDATION_FAILED")


@pytest.mark.parametrize(
    "change,code,status",
    [
        ({"idempotency_key": None}, "INVALID_REQUEST", 400),
        ({"trigger": "SOMETIME"}, "INVALID_REQUEST", 400),
        ({"unknown": 1}, "INVALID_REQUEST", 400),
        ({"trigger": "DELAYED"}, "INVALID_REQUEST", 400),
        ({"trigger": "DELAYED", "run_at": "18:00"}, "INVALID_REQUEST", 400),
        (
            {"trigger": "CRON", "cron": "0 9 * * MON", "timezone": "Mars/Base"},
            "INVALID_REQUEST",
            400,
        ),
        ({"trigger": "CRON", "cron": "0 9 * MON", "timezone": "UTC"}, "INVALID_CRON", 422),
        (
            {
                "trigger": "CRON",
                "cron": "0 9 * * *",
                "timezone": "UTC",
                "starts_at": "2030-01-02T00:00:00Z",
                "ends_at": "2030-01-01T00:00:00Z",
            },
            "INVALID_REQUEST",
            400,
        ),
    ],
)
def test_field_rules(
    api: ApiClient, endpoint: str, change: dict[str, Any], code: str, status: int
) -> None:
    body = immediate()
    body.update(change)
    body = {k: v for k, v in body.items() if v is not None}
    reply = api.post("/jobs", body)
    assert (reply.status, reply.error_code) == (status, code)


def test_malformed_json_is_400(api: ApiClient, endpoint: str) -> None:
    reply = api.post("/jobs", raw=b'{"endpoint": ')
    assert (reply.status, reply.error_code) == (400, "INVALID_REQUEST")


# -- idempotency --------------------------------------------------------------------------


def test_repeat_returns_existing_job_with_200(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    first = api.post("/jobs", immediate())
    again = api.post("/jobs", immediate(input={"user_id": "someone-else"}))
    assert (first.status, again.status) == (201, 200)
    assert again.body == first.body  # the first body wins
    assert database.run("SELECT count(*) AS n FROM jobs")[0]["n"] == 1
    # Same key on another endpoint is another job.
    f.endpoint(database, "other")
    assert api.post("/jobs", immediate(endpoint="other")).status == 201


def test_repeat_shows_the_current_execution_status(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    first = api.post("/jobs", immediate()).body
    f.set_execution(database, first["execution"]["execution_id"], status="RUNNING")
    assert api.post("/jobs", immediate()).body["execution"]["status"] == "RUNNING"


def test_cron_idempotency_key_deduplicates(api: ApiClient, endpoint: str) -> None:
    body = {
        "endpoint": EP,
        "trigger": "CRON",
        "cron": "0 9 * * *",
        "timezone": "UTC",
        "idempotency_key": "daily",
        "input": {"user_id": "u"},
    }
    first = api.post("/jobs", body)
    again = api.post("/jobs", body)
    assert (first.status, again.status) == (201, 200)
    assert again.body["job_id"] == first.body["job_id"]
    assert again.body["idempotency_key"] == "daily"


def test_concurrent_identical_requests_create_exactly_one_job(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    barrier = threading.Barrier(8)
    replies: list[Any] = []
    lock = threading.Lock()

    def post() -> None:
        barrier.wait()
        reply = api.post("/jobs", immediate("race"))
        with lock:
            replies.append(reply)

    threads = [threading.Thread(target=post) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    statuses = sorted(reply.status for reply in replies)
    assert statuses == [200] * 7 + [201]
    assert len({reply.body["job_id"] for reply in replies}) == 1
    counts = database.run(
        "SELECT (SELECT count(*) FROM jobs) AS jobs, (SELECT count(*) FROM executions) AS execs,"
        " (SELECT count(*) FROM execution_logs) AS logs"
    )[0]
    assert counts == {"jobs": 1, "execs": 1, "logs": 1}


# -- reading ------------------------------------------------------------------------------


def test_get_job_and_404(api: ApiClient, endpoint: str) -> None:
    created = api.post("/jobs", immediate()).body
    reply = api.get(f"/jobs/{created['job_id']}")
    assert reply.status == 200
    assert reply.body == created
    missing = api.get("/jobs/job_missing")
    assert (missing.status, missing.error_code) == (404, "JOB_NOT_FOUND")
    assert "job_missing" in missing.body["error"]["message"]


def test_list_filters_and_pagination(api: ApiClient, database: Database, endpoint: str) -> None:
    f.endpoint(database, "other")
    ids = [api.post("/jobs", immediate(f"k{i}")).body["job_id"] for i in range(3)]
    delayed = api.post(
        "/jobs", immediate("d", trigger="DELAYED", run_at="2030-01-01T00:00:00Z")
    ).body["job_id"]
    cron = api.post(
        "/jobs",
        {"endpoint": "other", "trigger": "CRON", "cron": "* * * * *", "timezone": "UTC"},
    ).body["job_id"]
    everything = api.get("/jobs").body
    assert [job["job_id"] for job in everything["items"]] == [cron, delayed, *reversed(ids)]
    assert everything["cursor"] is None
    assert everything["items"][1]["execution"]["status"] == "PENDING"

    assert [j["job_id"] for j in api.get("/jobs?trigger=CRON").body["items"]] == [cron]
    assert [j["job_id"] for j in api.get("/jobs?endpoint=other").body["items"]] == [cron]
    assert len(api.get(f"/jobs?endpoint={EP}&trigger=IMMEDIATE").body["items"]) == 3
    api.post(f"/jobs/{cron}/cancel")
    assert [j["job_id"] for j in api.get("/jobs?status=RETIRED").body["items"]] == [cron]
    assert len(api.get("/jobs?status=ACTIVE").body["items"]) == 4

    seen: list[str] = []
    cursor = None
    while True:
        path = "/jobs?limit=2" + (f"&cursor={cursor}" if cursor else "")
        page = api.get(path).body
        seen += [job["job_id"] for job in page["items"]]
        # A job created mid-pagination is newer than the cursor: never shows up in later pages.
        api.post("/jobs", immediate(f"late-{len(seen)}"))
        cursor = page["cursor"]
        if cursor is None:
            break
    assert seen == [cron, delayed, *reversed(ids)]


@pytest.mark.parametrize(
    "query", ["trigger=NOW", "status=DONE", "limit=0", "limit=abc", "cursor=garbage", "endpoint="]
)
def test_list_rejects_bad_parameters(api: ApiClient, query: str) -> None:
    reply = api.get(f"/jobs?{query}")
    assert (reply.status, reply.error_code) == (400, "INVALID_REQUEST")
