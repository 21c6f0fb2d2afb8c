"""Signing secrets through the API on real PostgreSQL: an endpoint's
``spec.signing_secret`` must name a whsec_ secret, such a secret cannot be deleted or
rotated to a value that cannot sign while used, and a rotation keeps the previous key."""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

import pytest

from chalicelib.db.connection import Database
from tests.support.api_client import ApiClient

KEY = bytes(range(7, 39))
SIGNING = "whsec_" + base64.b64encode(KEY).decode()
NEW_KEY = bytes(range(50, 82))
NEW_SIGNING = "whsec_" + base64.b64encode(NEW_KEY).decode()
LATER = "2030-03-15T18:00:00Z"
#: Every spelling of the keys a response or log line must never contain.
FORBIDDEN = [
    s
    for k in (KEY, NEW_KEY)
    for s in (base64.b64encode(k).decode().rstrip("="), k.hex(), base64.urlsafe_b64encode(k)[:30])
]


def endpoint(name: str = "signed", signer: str | None = "hooks", **spec: Any) -> dict:
    body_spec: dict[str, Any] = {"url": "https://example.com/hook", "method": "POST", **spec}
    if signer is not None:
        body_spec["signing_secret"] = signer
    return {"name": name, "type": "HTTP", "spec": body_spec}


def assert_no_key(*texts: Any) -> None:
    raw = json.dumps(texts, default=str)
    for form in FORBIDDEN:
        assert str(form) not in raw


def previous_columns(database: Database, name: str) -> dict[str, Any]:
    [row] = database.run(
        "SELECT previous_encrypted_value, rotated_at FROM secrets WHERE name = :name", name=name
    )
    return row


def decrypt(name: str, blob: bytes) -> str:
    from chalicelib.wiring.process import ProcessRoot

    return ProcessRoot().reading_box().decrypt(name, bytes(blob))  # the process's keys


def test_an_endpoint_signs_with_an_existing_whsec_secret(api: ApiClient) -> None:
    missing = api.post("/endpoints", endpoint())
    assert (missing.status, missing.error_code) == (422, "INVALID_SIGNING_SECRET")
    assert (
        "Secret 'hooks' cannot be used as a signing secret: it must exist"
        in (missing.body["error"]["message"])
    )

    assert api.post("/secrets", {"name": "hooks", "value": SIGNING}).status == 201
    created = api.post("/endpoints", endpoint())
    assert created.status == 201, created.body
    assert created.body["spec"]["signing_secret"] == "hooks"
    assert api.get("/endpoints/signed").body["spec"]["signing_secret"] == "hooks"
    assert_no_key(created.body, api.get("/endpoints").body, api.get("/secrets/hooks").body)


@pytest.mark.parametrize(
    "value",
    [
        "sk-live-not-a-signing-key",
        "whsec_***",
        "whsec_" + base64.b64encode(b"short").decode(),
    ],
)
def test_a_secret_that_cannot_sign_is_422_at_endpoint_write_time(
    api: ApiClient, value: str
) -> None:
    assert api.post("/secrets", {"name": "hooks", "value": value}).status == 201
    assert api.post("/endpoints", endpoint("plain", signer=None)).status == 201
    for reply in (
        api.post("/endpoints", endpoint()),
        api.put("/endpoints/plain", endpoint("plain")),
    ):
        assert (reply.status, reply.error_code) == (422, "INVALID_SIGNING_SECRET"), reply.body
        message = reply.body["error"]["message"]
        assert "it must exist and hold a Standard Webhooks key" in message
        assert value.removeprefix("whsec_") not in message
    assert api.get("/endpoints/signed").status == 404
    assert "signing_secret" not in api.get("/endpoints/plain").body["spec"]


def test_a_signing_secret_name_that_is_not_a_name_is_400(api: ApiClient) -> None:
    reply = api.post("/endpoints", endpoint(signer="{{secret.hooks}}"))
    assert (reply.status, reply.error_code) == (400, "INVALID_REQUEST")
    assert "spec.signing_secret" in reply.body["error"]["message"]


def test_a_signing_secret_cannot_be_deleted_while_an_endpoint_or_live_job_signs_with_it(
    api: ApiClient,
) -> None:
    assert api.post("/secrets", {"name": "hooks", "value": SIGNING}).status == 201
    assert api.post("/endpoints", endpoint()).status == 201
    refused = api.delete("/secrets/hooks")
    assert (refused.status, refused.error_code) == (409, "CONFLICT")
    assert "signed" in refused.body["error"]["message"]

    job = {"endpoint": "signed", "trigger": "DELAYED", "run_at": LATER, "idempotency_key": "k"}
    created = api.post("/jobs", job)
    assert created.status == 201, created.body
    assert api.put("/endpoints/signed", endpoint(signer=None)).status == 200
    refused = api.delete("/secrets/hooks")
    assert refused.status == 409 and created.body["job_id"] in refused.body["error"]["message"]

    assert api.post(f"/jobs/{created.body['job_id']}/cancel", {}).status == 200
    assert api.delete("/secrets/hooks").status == 204


def test_a_rotation_keeps_the_previous_key_and_refuses_a_value_that_cannot_sign(
    api: ApiClient, database: Database
) -> None:
    assert api.post("/secrets", {"name": "hooks", "value": SIGNING}).status == 201
    assert api.post("/endpoints", endpoint()).status == 201
    assert previous_columns(database, "hooks") == {
        "previous_encrypted_value": None,
        "rotated_at": None,
    }

    refused = api.put("/secrets/hooks", {"value": "sk-live-oops"})
    assert (refused.status, refused.error_code) == (422, "INVALID_SIGNING_SECRET")
    assert "endpoint signed" in refused.body["error"]["message"]
    assert "sk-live-oops" not in json.dumps(refused.body)
    [row] = database.run("SELECT encrypted_value FROM secrets WHERE name = 'hooks'")
    assert decrypt("hooks", row["encrypted_value"]) == SIGNING  # nothing half-written

    rotated = api.put("/secrets/hooks", {"value": NEW_SIGNING})
    assert rotated.status == 200
    assert_no_key(refused.body, rotated.body)
    columns = previous_columns(database, "hooks")
    assert decrypt("hooks", columns["previous_encrypted_value"]) == SIGNING
    assert columns["rotated_at"] is not None


def test_rotating_an_ordinary_secret_keeps_nothing(api: ApiClient, database: Database) -> None:
    assert api.post("/secrets", {"name": "plain", "value": SIGNING}).status == 201
    assert api.put("/secrets/plain", {"value": NEW_SIGNING}).status == 200
    assert previous_columns(database, "plain")["rotated_at"] is not None
    # Not used for signing, so a value of any form is accepted, and no old value is kept.
    assert api.put("/secrets/plain", {"value": "sk-ordinary"}).status == 200
    assert previous_columns(database, "plain") == {
        "previous_encrypted_value": None,
        "rotated_at": None,
    }


def test_signing_keys_never_reach_the_logs(
    api: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    api.post("/secrets", {"name": "hooks", "value": SIGNING})
    api.post("/endpoints", endpoint())
    api.put("/secrets/hooks", {"value": NEW_SIGNING})
    api.put("/secrets/hooks", {"value": "whsec_bad"})
    for record in caplog.records:
        assert_no_key(record.getMessage(), record.__dict__)
