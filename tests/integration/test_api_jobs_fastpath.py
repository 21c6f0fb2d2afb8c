"""POST /jobs in one statement (chalicelib/services/jobs/fastpath.py): once this process
knows an endpoint, a job is one round trip, and it answers exactly as the full transaction
would when the endpoint, its payload spec or the key changed behind the process's back
(here: changed by SQL, as another API process would)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pg8000.core
import pytest
from pg8000.exceptions import InterfaceError

from chalicelib.db import connection as db_connection
from chalicelib.db.connection import Database
from tests.support.api_client import ApiClient
from tests.support.seed import jobs as f

EP = "send-welcome-email"


@pytest.fixture
def endpoint(database: Database) -> str:
    return f.welcome_endpoint(database)


def body(key: str, **input_: Any) -> dict[str, Any]:
    return {
        "endpoint": EP,
        "trigger": "IMMEDIATE",
        "idempotency_key": key,
        "input": {"user_id": "u_1", **input_},
    }


class Wire:
    """Every message exchange the process has with PostgreSQL, by kind."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[str] = []
        for method in ("execute_simple", "execute_unnamed", "execute_named", "prepare_statement"):
            original = getattr(pg8000.core.CoreConnection, method)
            monkeypatch.setattr(pg8000.core.CoreConnection, method, self._spy(method, original))

    def _spy(self, method: str, original: Any) -> Any:
        def spy(conn: Any, *args: Any, **kwargs: Any) -> Any:
            self.calls.append(method)
            return original(conn, *args, **kwargs)

        return spy


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> Iterator[Wire]:
    yield Wire(monkeypatch)


def _jobs(database: Database) -> list[dict[str, Any]]:
    return database.run(
        "SELECT j.job_id, j.endpoint_snapshot, e.max_attempts, e.status,"
        " (SELECT count(*) FROM execution_logs l WHERE l.execution_id = e.execution_id) AS logs"
        " FROM jobs j JOIN executions e USING (job_id) ORDER BY j.created_at, j.job_id"
    )


def test_a_known_endpoint_makes_post_jobs_one_round_trip(
    api: ApiClient, database: Database, endpoint: str, wire: Wire
) -> None:
    assert api.post("/jobs", body("first")).status == 201  # reads the endpoint: full path
    wire.calls.clear()
    for key in ("second", "third"):
        reply = api.post("/jobs", body(key))
        assert reply.status == 201
        # One bind-and-execute of a prepared statement: no BEGIN, no COMMIT, no reads. The
        # full path wrote with the same statement (jobs_create_and_wake), so it is already
        # prepared on this connection.
        assert wire.calls == ["execute_named"]
        wire.calls.clear()
    assert reply.body["execution"]["status"] == "QUEUED"
    rows = _jobs(database)
    assert [r["job_id"] for r in rows][-1] == reply.body["job_id"]
    assert rows[-1]["status"] == "QUEUED" and rows[-1]["logs"] == 1


def test_an_endpoint_changed_elsewhere_is_read_again(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    assert api.post("/jobs", body("before")).status == 201
    database.execute(
        "UPDATE endpoints SET retry_policy = CAST(:p AS JSONB) WHERE name = :n",
        p=json.dumps({"max_attempts": 7, "backoff": "fixed", "initial_delay_ms": 10}),
        n=EP,
    )
    reply = api.post("/jobs", body("after"))
    assert reply.status == 201
    after = _jobs(database)[-1]
    assert after["job_id"] == reply.body["job_id"]
    assert after["max_attempts"] == 7
    assert after["endpoint_snapshot"]["retry_policy"]["max_attempts"] == 7


def test_a_payload_spec_changed_elsewhere_checks_the_new_schema(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    assert api.post("/jobs", body("before")).status == 201
    stricter = {**f.USER_SCHEMA, "required": ["user_id", "plan"]}
    database.execute(
        "UPDATE payload_specs SET schema_json = CAST(:s AS JSONB)", s=json.dumps(stricter)
    )
    reply = api.post("/jobs", body("after"))
    assert reply.status == 422 and reply.error_code == "INPUT_VALIDATION_FAILED"
    assert "plan" in reply.body["error"]["message"]
    assert len(_jobs(database)) == 1


def test_an_endpoint_deleted_elsewhere_is_404(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    assert api.post("/jobs", body("before")).status == 201
    database.execute("UPDATE endpoints SET deleted_at = now() WHERE name = :n", n=EP)
    for key in ("after", "again"):  # the second no longer tries the remembered endpoint
        reply = api.post("/jobs", body(key))
        assert reply.status == 404 and reply.error_code == "ENDPOINT_NOT_FOUND"
    assert len(_jobs(database)) == 1


def test_a_known_key_is_200_with_the_existing_job_even_with_invalid_input(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    first = api.post("/jobs", body("k"))
    again = api.post("/jobs", body("k", extra="different body"))
    assert (first.status, again.status) == (201, 200)
    assert again.body["job_id"] == first.body["job_id"]
    invalid = api.post("/jobs", {**body("k"), "input": {"no_user_id": True}})
    assert invalid.status == 200 and invalid.body["job_id"] == first.body["job_id"]
    assert len(_jobs(database)) == 1


def test_invalid_input_with_a_free_key_is_422_and_writes_nothing(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    assert api.post("/jobs", body("first")).status == 201
    reply = api.post("/jobs", {**body("fresh"), "input": {"no_user_id": True}})
    assert reply.status == 422 and reply.error_code == "INPUT_VALIDATION_FAILED"
    assert len(_jobs(database)) == 1


def test_a_lost_connection_after_the_statement_committed_answers_201_once(
    api: ApiClient, database: Database, endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert api.post("/jobs", body("first")).status == 201
    original = db_connection.Transaction.run
    lost: list[str] = []

    def run_then_lose_the_answer(tx: Any, query: Any, **params: Any) -> Any:
        rows = original(tx, query, **params)
        if getattr(query, "name", "").startswith("jobs_create") and not lost:
            lost.append(query.name)
            raise InterfaceError("network error: the answer never came")
        return rows

    monkeypatch.setattr(db_connection.Transaction, "run", run_then_lose_the_answer)
    reply = api.post("/jobs", body("second"))
    assert lost and lost[0].startswith("jobs_create")
    assert reply.status == 201
    jobs = _jobs(database)
    assert len(jobs) == 2 and jobs[-1]["job_id"] == reply.body["job_id"]
    assert jobs[-1]["logs"] == 1


def test_callbacks_take_the_full_path(
    api: ApiClient, database: Database, endpoint: str, wire: Wire
) -> None:
    f.endpoint(database, "audit")
    assert api.post("/jobs", body("first")).status == 201
    wire.calls.clear()
    reply = api.post("/jobs", {**body("second"), "on_success": "audit"})
    assert reply.status == 201
    assert "execute_simple" in wire.calls  # BEGIN ... COMMIT: the transaction reads them
    on_success = database.run(
        "SELECT on_success FROM executions WHERE job_id = :j", j=reply.body["job_id"]
    )
    assert on_success == [{"on_success": "audit"}]
