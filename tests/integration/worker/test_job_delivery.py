"""A job's own delivery settings and retries with the endpoint's current definition,
delivered by a real worker to real HTTP targets on loopback: per-job retry policy and
timeout, max_retry_duration_ms, expire_after, a job's own URL under its endpoint's
allowed_url_prefixes (and the address policy at delivery), and endpoint_version."""

from __future__ import annotations

import time
from typing import Any

import pytest

from chalicelib.db.connection import Database
from tests.support.api_client import ApiClient
from tests.support.factories import register_endpoint
from tests.support.seed.worker import attempts
from tests.support.served import HttpTarget, Reply
from tests.support.worker_runs import settle

#: The claim decides what these tests see: make test runs them again in CockroachDB's
#: configuration (test-cockroach).
pytestmark = pytest.mark.claim_path


def hook(api: ApiClient, target: HttpTarget, name: str, **extra: Any) -> None:
    spec = {"url": target.url(f"/{name}"), "method": "POST", "expected_status_codes": [200]}
    spec.update(extra.pop("spec", {}))
    register_endpoint(api, name, spec=spec, **extra)


def post_job(api: ApiClient, endpoint: str, key: str, **extra: Any) -> str:
    body = {"endpoint": endpoint, "trigger": "IMMEDIATE", "idempotency_key": key, "input": {}}
    reply = api.post("/jobs", {**body, **extra})
    assert reply.status == 201, reply.body
    return str(reply.body["execution"]["execution_id"])


def errors(database: Database, execution_id: str) -> list[str]:
    return [a["error"]["type"] for a in attempts(database, execution_id)]


def test_a_jobs_retry_policy_and_timeout_override_its_endpoints(
    api: ApiClient, database: Database, make_worker: Any, http_target: HttpTarget
) -> None:
    hook(api, http_target, "slow")  # one attempt, 30 s timeout
    http_target.script("/slow", Reply(200, body="{}", delay=1.0))
    policy = {"max_attempts": 3, "backoff": "fixed", "initial_delay_ms": 0}
    own = post_job(api, "slow", "own", retry_policy=policy, timeout_ms=100)
    assert api.get(f"/executions/{own}").body["max_attempts"] == 3

    assert settle(make_worker(), database, [own]) == {"FAILED": 1}
    assert errors(database, own) == ["TIMEOUT"] * 3


def test_max_retry_duration_ends_the_execution_failed_with_its_last_error(
    api: ApiClient, database: Database, make_worker: Any, http_target: HttpTarget
) -> None:
    """No retry is scheduled past the first attempt's start plus the window: the second
    failure (at about 1 s) would retry at about 2 s, past 1.5 s."""
    policy = {"max_attempts": 10, "backoff": "fixed", "initial_delay_ms": 1000}
    hook(api, http_target, "down", retry_policy=policy)
    http_target.script("/down", Reply(503, body="down"))
    windowed = post_job(api, "down", "w", retry_policy={"max_retry_duration_ms": 1500})

    assert settle(make_worker(), database, [windowed]) == {"FAILED": 1}
    assert errors(database, windowed) == ["HTTP_ERROR", "HTTP_ERROR"]
    [dead] = api.get("/executions?status=FAILED&endpoint=down").body["items"]
    assert dead["error_type"] == "HTTP_ERROR"  # its last error, not a new one
    logs = database.run(
        "SELECT log_message FROM attempts WHERE execution_id = :id ORDER BY attempt_number",
        id=windowed,
    )
    assert "max_retry_duration_ms (1500 ms)" in logs[-1]["log_message"]


def test_an_execution_claimed_after_its_expire_after_fails_expired_and_is_never_sent(
    api: ApiClient, database: Database, make_worker: Any, http_target: HttpTarget
) -> None:
    hook(api, http_target, "late-cb")
    hook(api, http_target, "late", on_failure="late-cb")
    http_target.script("/late", Reply(200, body="{}"))
    http_target.script("/late-cb", Reply(200, body="{}"))
    expired = post_job(api, "late", "e1", expire_after="200ms")
    on_time = post_job(api, "late", "e2", expire_after="1h")
    time.sleep(0.4)  # no worker runs: both are claimed late, one too late

    worker = make_worker()
    assert settle(worker, database, [expired, on_time]) == {"FAILED": 1, "SUCCESS": 1}
    assert errors(database, expired) == ["EXPIRED"]
    assert len(http_target.received("/late")) == 1  # only the one on time
    shown = api.get("/executions?status=FAILED&error_type=EXPIRED").body["items"]
    assert [e["execution_id"] for e in shown] == [expired]
    # An expired execution ends as any failure does: its callback follows.
    [callback] = database.run(
        "SELECT e.execution_id FROM executions e JOIN jobs j USING (job_id)"
        " WHERE j.parent_execution_id = :id",
        id=expired,
    )
    settle(worker, database, [callback["execution_id"]])
    assert len(http_target.received("/late-cb")) == 1


def test_a_job_is_delivered_to_its_own_url_under_the_endpoints_prefixes(
    api: ApiClient, database: Database, make_worker: Any, http_target: HttpTarget
) -> None:
    prefixes = [http_target.url("/tenants/")]
    hook(api, http_target, "fan", spec={"allowed_url_prefixes": prefixes, "method": "PUT"})
    http_target.script("/tenants/acme/hook", Reply(200, body="{}"))
    own = post_job(api, "fan", "u1", url=http_target.url("/tenants/acme/hook?x=1"))
    usual = post_job(api, "fan", "u2")

    assert settle(make_worker(), database, [own, usual]) == {"SUCCESS": 2}
    [sent] = http_target.received("/tenants/acme/hook")
    assert sent.method == "PUT"  # the endpoint's method, headers and template
    assert len(http_target.received("/fan")) == 1  # the job without a url: spec.url


def test_a_jobs_own_url_obeys_the_address_policy_at_delivery(
    api: ApiClient, database: Database, make_worker: Any, http_target: HttpTarget
) -> None:
    """The prefix admits a loopback URL; the worker's address policy (private targets not
    allowed) still refuses it at delivery, before any connection."""
    hook(api, http_target, "guarded", spec={"allowed_url_prefixes": [http_target.url("/in/")]})
    own = post_job(api, "guarded", "p1", url=http_target.url("/in/x"))

    worker = make_worker(allow_private_targets=False)
    assert settle(worker, database, [own]) == {"FAILED": 1}
    [attempt] = attempts(database, own)
    assert attempt["error"]["type"] == "CONNECTION_ERROR"
    assert "not an allowed delivery target" in attempt["error"]["message"]
    assert http_target.received("/in/x") == []


def test_a_retry_with_the_current_endpoint_goes_to_its_fixed_url_the_default_to_the_old(
    api: ApiClient, database: Database, make_worker: Any, http_target: HttpTarget
) -> None:
    hook(api, http_target, "broken")
    http_target.script("/broken", Reply(500, body="no"))
    http_target.script("/fixed", Reply(200, body="{}"))
    first = post_job(api, "broken", "b1")
    second = post_job(api, "broken", "b2")
    worker = make_worker()
    assert settle(worker, database, [first, second]) == {"FAILED": 2}
    fixed = {"url": http_target.url("/fixed"), "method": "POST", "expected_status_codes": [200]}
    assert api.put("/endpoints/broken", {"type": "HTTP", "spec": fixed}).status == 200

    default = api.post(f"/executions/{first}/retry").body
    assert default["endpoint_version"] == "snapshot"
    assert settle(worker, database, [first]) == {"FAILED": 1}
    assert len(http_target.received("/broken")) == 3  # the old URL again
    assert http_target.received("/fixed") == []

    current = api.post(f"/executions/{first}/retry", {"endpoint_version": "current"}).body
    assert (current["status"], current["endpoint_version"]) == ("QUEUED", "current")
    assert settle(worker, database, [first]) == {"SUCCESS": 1}
    assert len(http_target.received("/fixed")) == 1
    assert api.get(f"/executions/{first}").body["endpoint_version"] == "current"

    since, until = "2000-01-01T00:00:00Z", "9000-01-01T00:00:00Z"
    redrive = {"since": since, "until": until, "endpoint_version": "current"}
    assert api.post("/endpoints/broken/redrive", redrive).body["requeued"] == 1
    assert settle(worker, database, [second]) == {"SUCCESS": 1}
    assert api.get(f"/executions/{second}").body["endpoint_version"] == "current"
    assert len(http_target.received("/fixed")) == 2
