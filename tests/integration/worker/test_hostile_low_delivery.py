"""LOW findings of the hostile-input review, through the API on real PostgreSQL (and, where
delivery matters, the real worker and a loopback HTTP target)."""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

import pytest

from chalicelib.db.connection import Database
from tests.support.api_client import ApiClient
from tests.support.served import HttpTarget, Reply
from tests.support.worker_runs import settle

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


# -- 4. a new rate limit starts with a full bucket --------------------------------------------

ONE_PER_DAY = {"rate_limit": {"limit": 1, "period_ms": 86_400_000}}


def paced_endpoint(target: HttpTarget, flow_control: dict[str, Any] | None) -> dict[str, Any]:
    spec = {"url": target.url("/paced"), "method": "POST", "expected_status_codes": [200]}
    body = {"name": "paced", "type": "HTTP", "spec": spec}
    return body if flow_control is None else {**body, "flow_control": flow_control}


def fire(api: ApiClient, key: str) -> str:
    body = {"endpoint": "paced", "trigger": "IMMEDIATE", "idempotency_key": key, "input": {}}
    created = api.post("/jobs", body)
    assert created.status == 201, created.body
    return str(created.body["execution"]["execution_id"])


def delivered(api: ApiClient, execution_ids: list[str]) -> list[str]:
    return [api.get(f"/executions/{e}").body["status"] for e in execution_ids]


@pytest.mark.parametrize(
    "before",
    [None, {"max_concurrency": 5}, "no flow control"],
    ids=["new-endpoint", "had-only-max-concurrency", "had-no-flow-control"],
)
def test_a_new_rate_limit_of_one_per_day_delivers_its_first_execution_at_once(
    api: ApiClient, make_worker, http_target: HttpTarget, before: Any
) -> None:
    http_target.script("/paced", Reply(200))
    if before is None:
        assert api.post("/endpoints", paced_endpoint(http_target, ONE_PER_DAY)).status == 201
    else:
        flow = None if before == "no flow control" else before
        assert api.post("/endpoints", paced_endpoint(http_target, flow)).status == 201
        worker = make_worker()
        worker.run_once()  # the worker meters it (max_concurrency) or not (no flow control)
        replaced = api.put("/endpoints/paced", paced_endpoint(http_target, ONE_PER_DAY))
        assert replaced.status == 200, replaced.body
    first, second = fire(api, "first"), fire(api, "second")

    worker = make_worker()
    worker.run_once()  # one claim: the bucket's one token goes to the oldest execution
    worker.drain(10)

    assert delivered(api, [first, second]) == ["SUCCESS", "QUEUED"]
    assert len(http_target.received("/paced")) == 1
    # Sending the definition again does not refill the bucket: the second waits its day.
    assert api.put("/endpoints/paced", paced_endpoint(http_target, ONE_PER_DAY)).status == 200
    another = make_worker()  # its first poll makes a metered claim at once
    assert another.run_once() == 0
    another.drain(10)
    assert delivered(api, [first, second]) == ["SUCCESS", "QUEUED"]
