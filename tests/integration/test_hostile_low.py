"""LOW findings of the hostile-input review, through the API on real PostgreSQL at
SERIALIZABLE (the delivery ones are in tests/integration/worker/test_hostile_low_delivery.py).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from chalicelib.db.connection import Database
from tests.conftest import ApiClient
from tests.integration import jobs_factories as f

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
