"""LOW findings of the hostile-input review, through the API on real PostgreSQL at
SERIALIZABLE (the delivery ones are in tests/integration/worker/test_hostile_low_delivery.py).
"""

from __future__ import annotations

import base64
import json
import threading
from typing import Any

import pytest

from chalicelib.db.connection import Database, Transaction
from chalicelib.db.queries import queries
from tests.support.api_client import ApiClient
from tests.support.factories import register_endpoint
from tests.support.seed import jobs as f

EP = "send-welcome-email"

# -- 2. non-finite numbers are a 400 at parsing, never the database's error text -------------

NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e400"]


def count(database: Database, table: str) -> int:
    return int(database.run(f"SELECT count(*) AS n FROM {table}")[0]["n"])


def assert_refused_at_parsing(reply: Any) -> None:
    assert (reply.status, reply.error_code) == (400, "INVALID_REQUEST"), reply.body
    message = reply.body["error"]["message"]
    assert "numbers must be finite" in message
    for server_text in ("database", "invalid input syntax", "jsonb", "Token", "SQLSTATE"):
        assert server_text not in message


def job(key: str, value: str = "1") -> str:
    """A POST /jobs body as text: ``value`` goes into the input as written."""
    return (
        f'{{"endpoint": "{EP}", "trigger": "IMMEDIATE", "idempotency_key": "{key}", '
        f'"input": {{"user_id": "u", "n": {value}}}}}'
    )


@pytest.mark.parametrize("literal", NON_FINITE)
def test_a_job_input_with_a_non_finite_number_is_a_400(
    api: ApiClient, database: Database, literal: str
) -> None:
    f.welcome_endpoint(database)
    assert_refused_at_parsing(api.post("/jobs", raw=job("k", literal).encode()))
    assert count(database, "jobs") == 0
    assert api.post("/jobs", raw=job("k").encode()).status == 201  # the same body, finite


@pytest.mark.parametrize("atomic", [False, True], ids=["partial", "atomic"])
@pytest.mark.parametrize("literal", NON_FINITE)
def test_a_batch_item_with_a_non_finite_number_is_a_400_for_the_request(
    api: ApiClient, database: Database, literal: str, atomic: bool
) -> None:
    f.welcome_endpoint(database)
    items = f"[{job('k1')}, {job('k2', literal)}]"
    raw = f'{{"atomic": {json.dumps(atomic)}, "jobs": {items}}}'.encode()
    assert_refused_at_parsing(api.post("/jobs/batch", raw=raw))
    assert count(database, "jobs") == 0 and count(database, "batches") == 0


@pytest.mark.parametrize("literal", NON_FINITE)
def test_a_config_value_with_a_non_finite_number_is_a_400(
    api: ApiClient, database: Database, literal: str
) -> None:
    raw = f'{{"name": "c", "values": {{"rate": {literal}}}}}'.encode()
    assert_refused_at_parsing(api.post("/configs", raw=raw))
    assert api.get("/configs/c").error_code == "CONFIG_NOT_FOUND"
    assert api.post("/configs", {"name": "c", "values": {"rate": 1.5}}).status == 201
    assert_refused_at_parsing(api.put("/configs/c", raw=f'{{"values": [{literal}]}}'.encode()))
    assert api.get("/configs/c").body["values"] == {"rate": 1.5}


def test_a_value_the_database_refuses_is_answered_without_its_error_text(
    database: Database, app_env: dict[str, str]
) -> None:
    """Whatever else reaches the database unchecked: its 400 (class 22) and 409 (unique)
    answers keep their codes and hide the server's text."""
    from chalicelib.api.http import error_response
    from chalicelib.errors import DatabaseError

    insert = "INSERT INTO configs (name, values_json) VALUES ('x', '{}')"
    database.run(insert)
    refused: list[DatabaseError] = []
    for sql in ("SELECT CAST('NaN' AS JSONB)", insert):
        with pytest.raises(DatabaseError) as caught:
            database.run(sql)
        refused.append(caught.value)
    assert [(e.status, e.code) for e in refused] == [(400, "INVALID_REQUEST"), (409, "CONFLICT")]
    for exc in refused:
        body = json.loads(error_response(exc).body)["error"]
        assert body["code"] == exc.code
        for server_text in ("invalid input syntax", "Token", "duplicate key", "configs", "pk_"):
            assert server_text not in body["message"], body


# -- 5. INVALID_SIGNING_SECRET says nothing of the secret's value ---------------------------

#: Secrets an endpoint's author may name: what each one's value is must not show.
UNUSABLE = {
    "plain": "sk-live-0123456789abcdef",
    "prefixed": "whsec_" + base64.b64encode(b"k" * 10).decode(),  # a key of 10 bytes
    "long": "whsec_" + base64.b64encode(b"k" * 65).decode(),  # a key of 65 bytes
    "not_base64": "whsec_***",
}


def signed_endpoint(name: str, secret: str | None) -> dict[str, Any]:
    spec = {"url": "https://example.com/hook", "method": "POST"}
    if secret is not None:
        spec["signing_secret"] = secret
    return {"name": name, "type": "HTTP", "spec": spec}


def test_unusable_signing_secrets_get_one_answer_apart_from_their_name(api: ApiClient) -> None:
    for name, value in UNUSABLE.items():
        assert api.post("/secrets", {"name": name, "value": value}).status == 201
    assert api.post("/endpoints", signed_endpoint("plain-ep", None)).status == 201

    answers = []
    for secret in ["missing", *UNUSABLE]:
        for reply in (
            api.post("/endpoints", signed_endpoint("signed", secret)),
            api.put("/endpoints/plain-ep", signed_endpoint("plain-ep", secret)),
        ):
            assert (reply.status, reply.error_code) == (422, "INVALID_SIGNING_SECRET")
            error = dict(reply.body["error"])
            error.pop("request_id")
            answers.append(json.dumps(error).replace(f"'{secret}'", "'<name>'"))
    assert len(set(answers)) == 1, set(answers)
    assert json.loads(answers[0])["message"] == (
        "Secret '<name>' cannot be used as a signing secret: it must exist and hold a "
        "Standard Webhooks key (whsec_ + base64 of 24-64 bytes)."
    )


# -- 3. an endpoint that live work names as a callback cannot be deleted ---------------------

LATER = "2030-03-15T18:00:00Z"
DONE = "2026-03-15T18:00:01+00:00"


def later(key: str, **callbacks: str) -> dict[str, Any]:
    """A DELAYED job on "work" (its execution PENDING until 2030)."""
    body = {"endpoint": "work", "trigger": "DELAYED", "idempotency_key": key, "run_at": LATER}
    return body | callbacks


def refused_as_callback(reply: Any, *names: str) -> None:
    assert (reply.status, reply.error_code) == (409, "CONFLICT"), reply.body
    message = reply.body["error"]["message"]
    assert message.startswith("Endpoint 'cb' is the callback of"), message
    for name in names:
        assert name in message, (name, message)


@pytest.fixture
def callbacks(api: ApiClient) -> ApiClient:
    register_endpoint(api, "cb", "https://example.com/cb")
    register_endpoint(api, "work", "https://example.com/work")
    return api


@pytest.mark.parametrize("field", ["on_success", "on_failure"])
def test_a_live_one_shot_job_naming_the_endpoint_as_callback_keeps_it(
    callbacks: ApiClient, database: Database, field: str
) -> None:
    api = callbacks
    pending = api.post("/jobs", later("pending", **{field: "cb"})).body
    queued = api.post("/jobs", later("queued", **{field: "cb"})).body
    f.set_execution(database, queued["execution"]["execution_id"], status="QUEUED")
    refused_as_callback(api.delete("/endpoints/cb"), pending["job_id"], queued["job_id"], field)
    assert api.get("/endpoints/cb").status == 200
    # Finished work does not pin it: one cancelled, one ended (as a worker would leave it).
    assert api.post(f"/jobs/{pending['job_id']}/cancel").status == 200
    refused_as_callback(api.delete("/endpoints/cb"), queued["job_id"])
    execution_id = queued["execution"]["execution_id"]
    f.set_execution(database, execution_id, status="FAILED", completed_at=DONE)
    assert api.delete("/endpoints/cb").status == 204


def test_a_running_execution_and_an_active_cron_job_keep_it(
    callbacks: ApiClient, database: Database
) -> None:
    api = callbacks
    running = api.post("/jobs", later("running", on_success="cb")).body
    f.set_execution(database, running["execution"]["execution_id"], status="RUNNING")
    body = {"endpoint": "work", "trigger": "CRON", "cron": "0 9 1 1 *", "timezone": "UTC"}
    ticking = api.post("/jobs", body | {"on_failure": "cb"}).body
    refused_as_callback(api.delete("/endpoints/cb"), running["job_id"], ticking["job_id"])
    f.set_execution(
        database, running["execution"]["execution_id"], status="SUCCESS", completed_at=DONE
    )
    refused_as_callback(api.delete("/endpoints/cb"), ticking["job_id"])
    assert api.post(f"/jobs/{ticking['job_id']}/cancel").status == 200  # retired
    assert api.delete("/endpoints/cb").status == 204


def test_a_live_batch_naming_the_endpoint_on_complete_keeps_it(
    callbacks: ApiClient, database: Database
) -> None:
    api = callbacks
    created = api.post("/jobs/batch", {"jobs": [later("b1")], "on_complete": "cb"}).body
    batch_id = created["batch_id"]
    execution_id = created["items"][0]["job"]["execution"]["execution_id"]
    refused_as_callback(api.delete("/endpoints/cb"), batch_id, "on_complete")
    # Its on_complete has fired (the 'batch:<id>' job on cb, finished) and a retried member
    # reopened it: it will not fire again, so it does not pin the endpoint.
    f.set_execution(database, execution_id, status="SUCCESS", completed_at=DONE)
    database.execute(
        "INSERT INTO jobs (endpoint, endpoint_type, trigger_type, idempotency_key) "
        "VALUES ('cb', 'HTTP', 'IMMEDIATE', :key)",
        key=f"batch:{batch_id}",
    )
    f.set_execution(database, execution_id, status="QUEUED", completed_at=None)
    assert api.delete("/endpoints/cb").status == 204


def test_a_finished_batch_does_not_keep_it(callbacks: ApiClient, database: Database) -> None:
    api = callbacks
    created = api.post("/jobs/batch", {"jobs": [later("b1")], "on_complete": "cb"}).body
    execution_id = created["items"][0]["job"]["execution"]["execution_id"]
    f.set_execution(database, execution_id, status="FAILED", completed_at=DONE)
    assert api.delete("/endpoints/cb").status == 204


def test_an_endpoint_naming_it_as_default_callback_keeps_it(callbacks: ApiClient) -> None:
    api = callbacks
    register_endpoint(api, "dflt", "https://example.com/dflt", on_failure="cb")
    register_endpoint(api, "selfish", "https://example.com/selfish", on_success="selfish")
    refused_as_callback(api.delete("/endpoints/cb"), "dflt", "default on_success / on_failure")
    spec = {"url": "https://example.com/dflt", "method": "POST"}
    assert api.put("/endpoints/dflt", {"name": "dflt", "type": "HTTP", "spec": spec}).status == 200
    assert api.delete("/endpoints/cb").status == 204
    assert api.delete("/endpoints/selfish").status == 204  # naming itself keeps nothing


def test_the_callback_check_reads_only_the_partial_indexes_of_live_work(
    database: Database,
) -> None:
    from tests.integration.test_lifecycle_plans import DUE, LIVE, indexes_used

    used = indexes_used(database, "catalogue_endpoint_live_callbacks", name="cb", limit=11)
    assert used >= LIVE | {"idx_executions_running", "pk_jobs", "pk_batches"}, used
    assert used & DUE, used
    assert "idx_jobs_idempotency" in used, used  # has the batch's on_complete fired?


def test_a_job_naming_the_callback_created_during_the_delete_cannot_slip_between(
    callbacks: ApiClient, database: Database
) -> None:
    """A job creation reads the callback endpoint (as check_callbacks does), the delete
    commits, then the creation inserts its live execution naming it. SERIALIZABLE must not
    let both stand: the creation retries, and its retry no longer finds the endpoint. (A
    guard of the argument in catalogue_endpoint_live_callbacks, not of this change alone: on
    PostgreSQL the delete's live_jobs read already ranges over the same partial indexes.)"""
    api = callbacks
    endpoint_read, deleted = threading.Event(), threading.Event()
    found: list[bool] = []
    outcome: dict[str, Any] = {}

    def create_job(tx: Transaction) -> None:
        rows = tx.run(queries["jobs_get_endpoints"], names=["cb"])
        found.append(bool(rows))
        if len(found) == 1:
            endpoint_read.set()
            assert deleted.wait(30)
        if not rows:
            return  # the real path answers 422 INVALID_CALLBACK here
        job_id = tx.scalar(
            "INSERT INTO jobs (endpoint, endpoint_type, trigger_type, on_success) "
            "VALUES ('work', 'HTTP', 'DELAYED', 'cb') RETURNING job_id"
        )
        tx.execute(
            "INSERT INTO executions (job_id, endpoint, endpoint_type, status, on_success) "
            "VALUES (:job_id, 'work', 'HTTP', 'PENDING', 'cb')",
            job_id=job_id,
        )

    def delete() -> None:
        assert endpoint_read.wait(30)
        outcome["delete"] = api.delete("/endpoints/cb").status
        deleted.set()

    thread = threading.Thread(target=delete)
    thread.start()
    try:
        database.transaction(create_job, name="test_create_job")
    finally:
        deleted.set()
        thread.join()
    assert outcome["delete"] == 204
    assert found == [True, False]  # the first try failed (40001); the retry saw the delete
    live = database.run(
        "SELECT execution_id FROM executions WHERE on_success = 'cb' AND status = 'PENDING'"
    )
    assert live == []
