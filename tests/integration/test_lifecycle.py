"""Data lifecycle through the API on real PostgreSQL at SERIALIZABLE.

Live references block deletes (endpoint or snapshot of a live job), finished work is not
active and pins nothing, deletes are soft and history stays readable, registering a name
again revives it.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from chalicelib.db.connection import Database, Transaction
from chalicelib.db.queries import queries
from chalicelib.domain.jobs import CronSchedule, JobRequest
from chalicelib.domain.statuses import TriggerType
from chalicelib.errors import TaskExecutorError
from chalicelib.services.jobs.create import read_endpoints
from chalicelib.services.jobs.rows import JobRow, NewJob, create_params
from tests.support.api_client import ApiClient
from tests.support.seed import jobs as f

SPEC: dict[str, Any] = {
    "url": "{{config.base}}/hook",
    "method": "POST",
    "headers": {"Authorization": "Bearer {{secret.api_key}}"},
    "body_template": {"user": "{{input.user_id}}"},
}
ENDPOINT: dict[str, Any] = {
    "name": "hook",
    "type": "HTTP",
    "payload_spec": "hook-input",
    "config": "hook-config",
    "spec": SPEC,
}
BARE: dict[str, Any] = {
    "type": "HTTP",
    "spec": {"url": "http://127.0.0.1:9/other", "method": "POST"},
}
LATER = "2030-03-15T18:00:00Z"


@pytest.fixture
def setup(api: ApiClient) -> ApiClient:
    """A payload spec, config and secret, and the endpoint ``hook`` using all three."""
    schema = {"type": "object", "properties": {"user_id": {"type": "string"}}}
    assert api.post("/payload-specs", {"name": "hook-input", "schema": schema}).status == 201
    config = {"name": "hook-config", "values": {"base": "http://127.0.0.1:9"}}
    assert api.post("/configs", config).status == 201
    assert api.post("/secrets", {"name": "api_key", "value": "sk-1"}).status == 201
    assert api.post("/endpoints", ENDPOINT).status == 201
    return api


def delayed(api: ApiClient, key: str, endpoint: str = "hook") -> dict[str, Any]:
    body = {"endpoint": endpoint, "trigger": "DELAYED", "idempotency_key": key, "run_at": LATER}
    reply = api.post("/jobs", {**body, "input": {"user_id": "u1"}})
    assert reply.status == 201, reply.body
    return dict(reply.body)


def cron(api: ApiClient, endpoint: str = "hook") -> dict[str, Any]:
    body = {"endpoint": endpoint, "trigger": "CRON", "cron": "0 9 * * MON", "timezone": "UTC"}
    reply = api.post("/jobs", {**body, "input": {"user_id": "u1"}})
    assert reply.status == 201, reply.body
    return dict(reply.body)


def finish(database: Database, job: dict[str, Any], status: str = "SUCCESS") -> datetime:
    """Move a one-shot job's execution to a terminal status, as a worker would."""
    done = datetime(2026, 3, 15, 18, 0, 1, tzinfo=UTC)
    f.set_execution(database, job["execution"]["execution_id"], status=status, completed_at=done)
    return done


def drop_references(api: ApiClient) -> None:
    """PUT the endpoint so that it references neither config, secret nor payload spec."""
    assert api.put("/endpoints/hook", BARE).status == 200


RESOURCES = [
    ("/configs/hook-config", "Config 'hook-config'"),
    ("/secrets/api_key", "Secret 'api_key'"),
    ("/payload-specs/hook-input", "Payload spec 'hook-input'"),
]

# -- 1. live references block deletes ------------------------------------------------------


@pytest.mark.parametrize(("path", "what"), RESOURCES)
def test_a_live_one_shot_jobs_snapshot_blocks_the_delete_until_it_finishes(
    setup: ApiClient, database: Database, path: str, what: str
) -> None:
    api = setup
    job = delayed(api, "k1")
    drop_references(api)
    reply = api.delete(path)
    assert (reply.status, reply.error_code) == (409, "CONFLICT")
    message = reply.body["error"]["message"]
    assert what in message and job["job_id"] in message and "endpoint(s)" not in message
    finish(database, job)
    assert api.delete(path).status == 204


@pytest.mark.parametrize(("path", "what"), RESOURCES)
def test_an_active_cron_jobs_snapshot_blocks_the_delete_until_it_is_cancelled(
    setup: ApiClient, path: str, what: str
) -> None:
    api = setup
    job = cron(api)
    drop_references(api)
    reply = api.delete(path)
    assert (reply.status, reply.error_code) == (409, "CONFLICT")
    assert job["job_id"] in reply.body["error"]["message"]
    assert api.post(f"/jobs/{job['job_id']}/cancel").status == 200
    assert api.delete(path).status == 204


def test_a_retired_cron_job_with_a_tick_in_flight_still_blocks(
    setup: ApiClient, database: Database
) -> None:
    api = setup
    job = cron(api)
    tick = f.add_execution(database, job["job_id"], status="RUNNING", created_at=datetime.now(UTC))
    assert api.post(f"/jobs/{job['job_id']}/cancel").status == 200
    drop_references(api)
    assert api.delete("/configs/hook-config").status == 409
    f.set_execution(database, tick, status="SUCCESS", completed_at=datetime.now(UTC))
    assert api.delete("/configs/hook-config").status == 204


def test_the_conflict_names_endpoints_and_at_most_ten_jobs(setup: ApiClient) -> None:
    api = setup
    jobs = [delayed(api, f"k{i}")["job_id"] for i in range(12)]
    message = api.delete("/configs/hook-config").body["error"]["message"]
    assert "endpoint(s) hook" in message
    named = [job_id for job_id in jobs if job_id in message]
    assert len(named) == 10 and "(and more)" in message
    assert set(named) == set(jobs[2:])  # the newest ten


def test_a_job_created_concurrently_with_a_delete_cannot_slip_between(
    setup: ApiClient, database: Database
) -> None:
    """Two connections: a job creation reads the endpoint while it still references the
    config, then the endpoint drops it and the config is deleted (committed), then the job
    is inserted with the old snapshot. SERIALIZABLE must not let both stand."""
    api = setup
    endpoint_read = threading.Event()
    deleted = threading.Event()
    outcome: dict[str, Any] = {}
    attempts: list[dict[str, Any]] = []

    def create_job(tx: Transaction) -> None:
        # The statements of the creation path (services/jobs/create.py), with a pause
        # between the endpoint's read and the insert.
        endpoint = read_endpoints(tx.run, ["hook"])["hook"]
        attempts.append(endpoint.snapshot)
        if len(attempts) == 1:
            endpoint_read.set()
            assert deleted.wait(30)
        job = JobRow.build(_cron_job(), endpoint, (None, None), datetime.now(UTC))
        tx.run(queries["jobs_create"], **create_params([job], []))

    def delete() -> None:
        assert endpoint_read.wait(30)
        drop_references(api)
        outcome["delete"] = api.delete("/configs/hook-config").status
        deleted.set()

    thread = threading.Thread(target=delete)
    thread.start()
    try:
        database.transaction(create_job, name="test_create_job")
    except TaskExecutorError as exc:  # retries exhausted would be a failure too
        outcome["create"] = exc
    thread.join()
    assert "create" not in outcome
    # The delete committed first, so the creation was the one to fail (40001) and retry; its
    # retry read the endpoint as it is now, without the config.
    assert outcome["delete"] == 204
    assert len(attempts) == 2
    assert attempts[0]["config_ref"] == "hook-config" and attempts[1]["config_ref"] is None
    live = database.run(
        "SELECT job_id FROM live_jobs WHERE endpoint_snapshot ->> 'config_ref' = 'hook-config'"
    )
    assert live == []


def _cron_job() -> NewJob:
    schedule = CronSchedule(
        expression="0 9 * * 1", timezone="UTC", starts_at=datetime.now(UTC), ends_at=None
    )
    request = JobRequest(
        endpoint="hook",
        trigger=TriggerType.CRON,
        idempotency_key=None,
        input={"user_id": "u1"},
        schedule=schedule,
    )
    return NewJob(request)


# -- 2. finished work is not active --------------------------------------------------------


@pytest.mark.parametrize("status", ["SUCCESS", "FAILED", "CANCELLED"])
def test_a_finished_one_shot_job_is_retired_with_its_executions_end(
    setup: ApiClient, database: Database, status: str
) -> None:
    api = setup
    job = delayed(api, "k1")
    assert api.get(f"/jobs/{job['job_id']}").body["status"] == "ACTIVE"
    active = api.get("/jobs?status=ACTIVE").body["items"]
    assert [j["job_id"] for j in active] == [job["job_id"]]
    done = finish(database, job, status)
    shown = api.get(f"/jobs/{job['job_id']}").body
    assert (shown["status"], shown["execution"]["status"]) == ("RETIRED", status)
    assert shown["retired_at"] == done.isoformat().replace("+00:00", "Z")
    assert api.get("/jobs?status=ACTIVE").body["items"] == []
    retired = api.get("/jobs?status=RETIRED").body["items"]
    assert [j["job_id"] for j in retired] == [job["job_id"]]
    assert api.get("/jobs").body["items"][0]["status"] == "RETIRED"
    # It no longer blocks its endpoint.
    assert api.delete("/endpoints/hook").status == 204


def test_active_listing_keeps_cron_jobs_and_live_one_shots_only(
    setup: ApiClient, database: Database
) -> None:
    api = setup
    live, finished, ticking = delayed(api, "live"), delayed(api, "done"), cron(api)
    finish(database, finished)
    retired = cron(api)
    assert api.post(f"/jobs/{retired['job_id']}/cancel").status == 200
    f.add_execution(database, retired["job_id"], status="QUEUED", created_at=datetime.now(UTC))
    ids = [j["job_id"] for j in api.get("/jobs?status=ACTIVE").body["items"]]
    assert ids == [ticking["job_id"], live["job_id"]]
    page = api.get("/jobs?status=ACTIVE&limit=1").body
    assert [j["job_id"] for j in page["items"]] == [ticking["job_id"]]
    rest = api.get(f"/jobs?status=ACTIVE&limit=1&cursor={page['cursor']}").body
    assert [j["job_id"] for j in rest["items"]] == [live["job_id"]]
    one_shot = api.get("/jobs?status=ACTIVE&trigger=DELAYED").body["items"]
    assert [j["job_id"] for j in one_shot] == [live["job_id"]]


def test_an_endpoint_with_a_live_job_cannot_be_deleted(
    setup: ApiClient, database: Database
) -> None:
    api = setup
    job = delayed(api, "k1")
    reply = api.delete("/endpoints/hook")
    assert (reply.status, reply.error_code) == (409, "CONFLICT")
    assert job["job_id"] in reply.body["error"]["message"]
    assert api.get("/endpoints/hook").status == 200
    finish(database, job, "FAILED")
    assert api.delete("/endpoints/hook").status == 204
    assert api.delete("/endpoints/hook").error_code == "ENDPOINT_NOT_FOUND"


# -- 3. soft deletion ----------------------------------------------------------------------


def test_a_deleted_endpoint_disappears_and_its_history_stays_readable(
    setup: ApiClient, database: Database
) -> None:
    api = setup
    job = delayed(api, "k1")
    execution_id = job["execution"]["execution_id"]
    f.add_attempt(database, execution_id, 1, "SUCCESS")
    finish(database, job)
    assert api.delete("/endpoints/hook").status == 204

    assert api.get("/endpoints/hook").error_code == "ENDPOINT_NOT_FOUND"
    assert api.get("/endpoints").body["items"] == []
    assert api.put("/endpoints/hook", BARE).error_code == "ENDPOINT_NOT_FOUND"
    again = {"endpoint": "hook", "trigger": "IMMEDIATE", "idempotency_key": "k2"}
    assert api.post("/jobs", again).error_code == "ENDPOINT_NOT_FOUND"
    assert api.get(f"/jobs/{job['job_id']}").body["status"] == "RETIRED"
    assert api.get(f"/executions/{execution_id}").body["status"] == "SUCCESS"
    assert len(api.get(f"/executions/{execution_id}/attempts").body["items"]) == 1
    assert api.get(f"/executions/{execution_id}/logs").body["items"]
    assert [j["job_id"] for j in api.get("/jobs?endpoint=hook").body["items"]] == [job["job_id"]]
    # The row stays (fk_jobs_endpoint), marked.
    rows = database.run("SELECT deleted_at FROM endpoints WHERE name = 'hook'")
    assert rows[0]["deleted_at"] is not None


def test_registering_a_deleted_endpoint_again_makes_it_live_with_the_new_definition(
    setup: ApiClient, database: Database
) -> None:
    api = setup
    first = api.get("/endpoints/hook").body
    job = delayed(api, "k1")
    finish(database, job)
    assert api.delete("/endpoints/hook").status == 204
    reborn = api.post("/endpoints", {"name": "hook", **BARE})
    assert reborn.status == 201, reborn.body
    assert reborn.body["spec"]["url"] == BARE["spec"]["url"] and reborn.body["config"] is None
    assert reborn.body["created_at"] > first["created_at"]
    assert api.get("/endpoints/hook").body == reborn.body
    assert api.post("/endpoints", {"name": "hook", **BARE}).error_code == "CONFLICT"
    # New jobs use the new definition; the old job keeps its own snapshot.
    new_job = delayed(api, "k2")
    snapshots = {
        r["job_id"]: r["s"] for r in database.run("SELECT job_id, endpoint_snapshot AS s FROM jobs")
    }
    assert snapshots[new_job["job_id"]]["spec"]["url"] == BARE["spec"]["url"]
    assert snapshots[job["job_id"]]["spec"]["url"] == SPEC["url"]


@pytest.mark.parametrize(
    ("collection", "name", "field", "value", "not_found"),
    [
        ("/configs", "hook-config", "values", {"base": "http://127.0.0.1:8"}, "CONFIG_NOT_FOUND"),
        ("/payload-specs", "hook-input", "schema", {"type": "object"}, "PAYLOAD_SPEC_NOT_FOUND"),
    ],
)
def test_configs_and_payload_specs_are_soft_deleted_and_revived(
    setup: ApiClient,
    database: Database,
    collection: str,
    name: str,
    field: str,
    value: Any,
    not_found: str,
) -> None:
    api = setup
    drop_references(api)
    assert api.delete(f"{collection}/{name}").status == 204
    assert api.get(f"{collection}/{name}").error_code == not_found
    assert api.put(f"{collection}/{name}", {field: value}).error_code == not_found
    assert api.delete(f"{collection}/{name}").error_code == not_found
    assert name not in [item["name"] for item in api.get(collection).body["items"]]
    # A deleted one cannot be referenced again...
    ref = "config" if collection == "/configs" else "payload_spec"
    refused = api.post("/endpoints", {"name": "other", **BARE, ref: name})
    assert refused.status == 422
    # ...until it is created again, with the new value.
    revived = api.post(collection, {"name": name, field: value})
    assert (revived.status, revived.body[field]) == (201, value)
    assert api.get(f"{collection}/{name}").body[field] == value
    assert api.post("/endpoints", {"name": "other", **BARE, ref: name}).status == 201


def test_a_deleted_secret_is_gone_for_real(setup: ApiClient, database: Database) -> None:
    api = setup
    drop_references(api)
    assert api.delete("/secrets/api_key").status == 204
    assert database.run("SELECT name FROM secrets") == []
    assert api.get("/secrets/api_key").error_code == "SECRET_NOT_FOUND"
    assert api.post("/secrets", {"name": "api_key", "value": "sk-2"}).status == 201


def test_a_deleted_endpoint_does_not_pin_its_config(setup: ApiClient, database: Database) -> None:
    api = setup
    assert api.delete("/endpoints/hook").status == 204
    assert api.delete("/configs/hook-config").status == 204
    assert api.delete("/payload-specs/hook-input").status == 204
    assert api.delete("/secrets/api_key").status == 204


def test_a_secret_is_matched_by_its_whole_name(setup: ApiClient) -> None:
    api = setup
    assert api.post("/secrets", {"name": "api_key_2", "value": "sk-2"}).status == 201
    spec = {**SPEC, "headers": {"Authorization": "Bearer {{ secret.api_key_2 }}"}}
    assert api.put("/endpoints/hook", {**ENDPOINT, "spec": spec}).status == 200
    job = delayed(api, "k1")
    drop_references(api)
    assert api.delete("/secrets/api_key").status == 204  # only "api_key_2" is used
    reply = api.delete("/secrets/api_key_2")
    assert reply.status == 409 and job["job_id"] in reply.body["error"]["message"]
