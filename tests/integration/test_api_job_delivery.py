"""POST /jobs and POST /jobs/batch with a job's own delivery settings (retry_policy,
timeout_ms, url, expire_after), endpoints with allowed_url_prefixes and a retry window,
and retry and redrive with endpoint_version: what is accepted and every refusal's status
and message, on real PostgreSQL through the app."""

from __future__ import annotations

from typing import Any

import pytest

from chalicelib.db.connection import Database
from tests.support.api_client import ApiClient
from tests.support.factories import register_endpoint
from tests.support.seed.dead_letters import fail

PREFIX = "https://hooks.example.com/tenants/"


@pytest.fixture
def fan(api: ApiClient) -> str:
    spec = {"url": "https://hooks.example.com/", "method": "POST", "allowed_url_prefixes": [PREFIX]}
    register_endpoint(api, "fan", spec=spec, retry_policy={"max_attempts": 2})
    register_endpoint(api, "plain", "https://plain.example.com/")
    return "fan"


def job(key: str, endpoint: str = "fan", **extra: Any) -> dict[str, Any]:
    body = {"endpoint": endpoint, "trigger": "IMMEDIATE", "idempotency_key": key, "input": {}}
    return {**body, **extra}


def refused(reply: Any, status: int, code: str, *words: str) -> None:
    assert reply.status == status, reply.body
    error = reply.body["error"]
    assert error["code"] == code
    for word in words:
        assert word in error["message"], error["message"]


def test_a_job_carries_its_own_settings(api: ApiClient, database: Database, fan: str) -> None:
    body = job(
        "k1",
        url=PREFIX + "acme/hook",
        timeout_ms=2000,
        expire_after="90s",
        retry_policy={"max_attempts": 5, "max_retry_duration_ms": 600_000},
    )
    reply = api.post("/jobs", body)
    assert reply.status == 201, reply.body
    execution = api.get(f"/executions/{reply.body['execution']['execution_id']}").body
    assert (execution["max_attempts"], execution["endpoint_version"]) == (5, "snapshot")
    [row] = database.run(
        "SELECT delivery_overrides FROM jobs WHERE job_id = :id", id=reply.body["job_id"]
    )
    assert row["delivery_overrides"] == {
        "url": PREFIX + "acme/hook",
        "timeout_ms": 2000,
        "expire_after_ms": 90_000,
        "retry_policy": {"max_attempts": 5, "max_retry_duration_ms": 600_000},
    }
    delayed = job("k2", trigger="DELAYED", run_at="2030-01-01T00:00:00Z", timeout_ms=10)
    assert api.post("/jobs", delayed).status == 201


def test_a_job_shows_its_own_settings_wherever_it_is_read(api: ApiClient, fan: str) -> None:
    """What POST /jobs set for the job is in its representation: the answer to the POST,
    GET /jobs/{id}, GET /jobs and its versions; a job that set nothing shows none of it."""
    settings = {
        "url": PREFIX + "acme/hook",
        "timeout_ms": 2000,
        "expire_after": "1h30m",
        "retry_policy": {"max_attempts": 5, "max_retry_duration_ms": 600_000},
    }
    created = api.post("/jobs", job("shown", **settings))
    assert created.status == 201, created.body
    job_id = created.body["job_id"]
    listed = api.get("/jobs?endpoint=fan&idempotency_key=shown").body["items"]
    versions = api.get(f"/jobs/{job_id}/versions").body["items"]
    for shown in (created.body, api.get(f"/jobs/{job_id}").body, *listed, *versions):
        assert {name: shown.get(name) for name in settings} == settings
    plain = api.post("/jobs", job("plain")).body
    for shown in (plain, api.get(f"/jobs/{plain['job_id']}").body):
        assert not set(settings) & set(shown)


def test_a_batch_item_carries_its_own_settings(api: ApiClient, fan: str) -> None:
    items = [job("b1", retry_policy={"max_attempts": 7}), job("b2", url="https://evil.test/")]
    reply = api.post("/jobs/batch", {"jobs": items})
    assert reply.status == 200, reply.body
    first, second = reply.body["items"]
    execution_id = first["job"]["execution"]["execution_id"]
    assert api.get(f"/executions/{execution_id}").body["max_attempts"] == 7
    assert (second["status"], second["error"]["code"]) == (422, "INVALID_TARGET")
    assert "Field 'url'" in second["error"]["message"]


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com.evil.test/tenants/a",
        "https://hooks.example.com@evil.test/tenants/a",
        "https://hooks.example.com/tenants/../admin",
        "https://hooks.example.com/tenants%2F..%2Fadmin",
        "https://hooks.example.com:8443/tenants/a",
    ],
)
def test_a_url_outside_the_prefixes_is_422_naming_the_field(
    api: ApiClient, fan: str, url: str
) -> None:
    refused(api.post("/jobs", job("u", url=url)), 422, "INVALID_TARGET", "Field 'url'")


def test_a_url_on_an_endpoint_without_prefixes_is_422(api: ApiClient, fan: str) -> None:
    reply = api.post("/jobs", job("u", "plain", url="https://plain.example.com/x"))
    refused(reply, 422, "INVALID_TARGET", "Field 'url'", "allowed_url_prefixes")


def test_a_known_key_wins_over_a_refused_url(api: ApiClient, fan: str) -> None:
    assert api.post("/jobs", job("same")).status == 201
    again = api.post("/jobs", job("same", url="https://evil.test/"))
    assert again.status == 200, again.body


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"timeout_ms": 0}, "'timeout_ms'"),
        ({"timeout_ms": 300_001}, "'timeout_ms'"),
        ({"expire_after": "1 hour"}, "'expire_after'"),
        ({"expire_after": "0s"}, "'expire_after'"),
        ({"retry_policy": {"max_attempts": 101}}, "retry_policy.max_attempts"),
        ({"retry_policy": {"max_retry_duration_ms": -1}}, "retry_policy.max_retry_duration_ms"),
        ({"retry_policy": {"backoff": "random"}}, "retry_policy.backoff"),
        ({"retry_policy": "3"}, "'retry_policy'"),
        ({"url": ["https://hooks.example.com/tenants/a"]}, "'url'"),
    ],
)
def test_bad_settings_are_400_naming_the_field(
    api: ApiClient, fan: str, extra: dict[str, Any], field: str
) -> None:
    refused(api.post("/jobs", job("bad", **extra)), 400, "INVALID_REQUEST", field)


def test_a_cron_job_takes_its_endpoints_settings(api: ApiClient, fan: str) -> None:
    body = {"endpoint": "fan", "trigger": "CRON", "cron": "* * * * *", "timezone": "UTC"}
    reply = api.post("/jobs", {**body, "timeout_ms": 100})
    refused(reply, 400, "INVALID_REQUEST", "Unknown field", "timeout_ms")


@pytest.mark.parametrize(
    ("prefixes", "where"),
    [
        (["https://hooks.example.com/tenants"], "spec.allowed_url_prefixes[0]"),
        (["https://u@hooks.example.com/"], "spec.allowed_url_prefixes[0]"),
        (["https://a.example.com/", "gopher://b/"], "spec.allowed_url_prefixes[1]"),
        ([], "spec.allowed_url_prefixes"),
    ],
)
def test_an_endpoint_with_a_bad_prefix_is_422_naming_it(
    api: ApiClient, prefixes: list[str], where: str
) -> None:
    spec = {"url": "https://a.example.com/", "method": "POST", "allowed_url_prefixes": prefixes}
    body = {"name": "bad", "type": "HTTP", "spec": spec}
    refused(api.post("/endpoints", body), 422, "INVALID_TARGET", f"Field '{where}")


def test_an_endpoint_retry_window_is_checked(api: ApiClient) -> None:
    spec = {"url": "https://a.example.com/", "method": "POST"}
    body = {"name": "w", "type": "HTTP", "spec": spec}
    bad = {**body, "retry_policy": {"max_retry_duration_ms": 0}}
    refused(api.post("/endpoints", bad), 400, "INVALID_REQUEST", "max_retry_duration_ms")
    good = {**body, "retry_policy": {"max_retry_duration_ms": 60_000}}
    reply = api.post("/endpoints", good)
    assert reply.status == 201, reply.body
    assert reply.body["retry_policy"]["max_retry_duration_ms"] == 60_000


def test_retry_and_redrive_refuse_an_unknown_endpoint_version(
    api: ApiClient, database: Database, fan: str
) -> None:
    execution_id = api.post("/jobs", job("r")).body["execution"]["execution_id"]
    fail(database, [execution_id])
    reply = api.post(f"/executions/{execution_id}/retry", {"endpoint_version": "latest"})
    refused(reply, 400, "INVALID_REQUEST", "'endpoint_version'", '"current"')
    reply = api.post(f"/executions/{execution_id}/retry", {"version": "current"})
    refused(reply, 400, "INVALID_REQUEST", "Unknown field", "version")
    window = {"since": "2000-01-01T00:00:00Z", "until": "9000-01-01T00:00:00Z"}
    reply = api.post("/endpoints/fan/redrive", {**window, "endpoint_version": 1})
    refused(reply, 400, "INVALID_REQUEST", "'endpoint_version'")
    retried = api.post(f"/executions/{execution_id}/retry", {"endpoint_version": "current"})
    assert (retried.status, retried.body["endpoint_version"]) == (200, "current")
