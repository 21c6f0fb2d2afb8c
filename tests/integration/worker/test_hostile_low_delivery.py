"""LOW findings of the hostile-input review, through the API on real PostgreSQL (and, where
delivery matters, the real worker and a loopback HTTP target)."""

from __future__ import annotations

import base64
import json
import logging

import pytest

from chalicelib.db.connection import Database
from tests.conftest import ApiClient
from tests.fixtures.services import HttpTarget, Reply
from tests.integration.worker.conftest import settle

# -- 1. a secret echoed hex-encoded is redacted ---------------------------------------------

KEY = bytes(range(60, 92))
SIGNING_VALUE = "whsec_" + base64.b64encode(KEY).decode()
PLAIN = "sk-live-hex-0123456789"


def hex_forms(*texts: str | bytes) -> list[str]:
    data = [t.encode() if isinstance(t, str) else t for t in texts]
    return [spelled for d in data for spelled in (d.hex(), d.hex().upper())]


def test_a_target_echoing_secrets_in_hex_gets_them_redacted(
    api: ApiClient,
    database: Database,
    make_worker,
    http_target: HttpTarget,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    assert api.post("/secrets", {"name": "pw", "value": PLAIN}).status == 201
    assert api.post("/secrets", {"name": "hooks", "value": SIGNING_VALUE}).status == 201
    forms = hex_forms(PLAIN, SIGNING_VALUE, KEY)
    http_target.script("/echo", Reply(200, body="echo " + " ".join(forms)))
    spec = {
        "url": http_target.url("/echo"),
        "method": "POST",
        "headers": {"X-Key": "{{secret.pw}}"},
        "signing_secret": "hooks",
        "expected_status_codes": [200],
    }
    assert api.post("/endpoints", {"name": "echo", "type": "HTTP", "spec": spec}).status == 201
    body = {"endpoint": "echo", "trigger": "IMMEDIATE", "idempotency_key": "k", "input": {}}
    execution_id = api.post("/jobs", body).body["execution"]["execution_id"]

    settle(make_worker(), database, [execution_id])

    shown = api.get(f"/executions/{execution_id}/attempts").body["items"]
    assert shown[0]["status"] == "SUCCESS"
    assert shown[0]["output"]["body"] == "echo " + " ".join(["[REDACTED]"] * len(forms))
    rows = database.run("SELECT output FROM attempts UNION ALL SELECT output FROM executions")
    haystack = json.dumps([shown, rows], default=str) + caplog.text
    for form in forms:
        assert form not in haystack
