"""The Python SDK (te.client) against the real stack: typed errors carrying the envelope,
pagination to the end. (``te executions retry`` runs against the real route in
test_cli.py.)"""

from __future__ import annotations

from typing import Any

import pytest

from te.client import ApiError, Client, ConfigError, Conflict, NotFound, Unauthorized, load_config
from tests.support.environment import BOOTSTRAP_KEY


def test_errors_are_typed_and_carry_the_envelope(stack: str) -> None:
    client = Client(stack, BOOTSTRAP_KEY)
    with pytest.raises(NotFound) as missing:
        client.jobs.get("job_missing")
    assert (missing.value.status, missing.value.code) == (404, "JOB_NOT_FOUND")
    assert missing.value.request_id and missing.value.request_id.startswith("req_")
    client.configs.create({"name": "c", "values": {}})
    with pytest.raises(Conflict) as taken:
        client.configs.create({"name": "c", "values": {}})
    assert taken.value.status == 409 and isinstance(taken.value, ApiError)
    with pytest.raises(Unauthorized):
        Client(stack, "wrong").configs.list()


def test_pages_follow_the_cursor_to_the_end(stack: str) -> None:
    client = Client(stack, BOOTSTRAP_KEY)
    for n in range(5):
        client.configs.create({"name": f"c{n}", "values": {"n": n}})
    first = client.configs.list(limit=2)
    assert len(first["items"]) == 2 and first["cursor"]
    names = [c["name"] for c in client.pages("/configs", {"limit": 2})]
    assert sorted(names) == [f"c{n}" for n in range(5)]
    client.configs.delete("c0")
    assert len(list(client.configs.list_all())) == 4
    health = client.health()
    assert (health["status"], health["database"]) == ("ok", "ok")
    assert health["processes"]["api"] >= 1
    assert "te_queue_depth" in client.metrics()


def test_configuration_from_the_environment_or_the_file(tmp_path: Any) -> None:
    assert load_config({"TE_URL": "http://x", "TE_API_KEY": "k"}) == ("http://x", "k")
    config = tmp_path / "c.toml"
    config.write_text('url = "http://y"\napi_key = "k2"\n')
    assert load_config({"TE_CONFIG": str(config)}) == ("http://y", "k2")
    assert load_config({"TE_CONFIG": str(config), "TE_URL": "http://z"}) == ("http://z", "k2")
    with pytest.raises(ConfigError, match="TE_URL"):
        load_config({"TE_CONFIG": str(tmp_path / "none.toml")})
    config.write_text("url = ")
    with pytest.raises(ConfigError, match="cannot read"):
        load_config({"TE_CONFIG": str(config)})


def test_a_delayed_job_found_by_its_key_and_rescheduled(stack: str) -> None:
    client = Client(stack, BOOTSTRAP_KEY)
    spec = {"url": "http://127.0.0.1:9/", "method": "POST"}
    client.endpoints.create({"name": "hook", "type": "HTTP", "spec": spec})
    job = client.jobs.create(
        {"endpoint": "hook", "trigger": "DELAYED", "delay": "15m", "idempotency_key": "k"}
    )
    assert client.jobs.find("hook", "k")["job_id"] == job["job_id"]
    assert client.jobs.find("hook", "other") is None
    moved = client.jobs.reschedule(job["job_id"], run_at="2999-01-01T00:00:00Z")
    assert (moved["job_id"], moved["run_at"], moved["version"]) == (
        job["job_id"],
        "2999-01-01T00:00:00Z",
        2,
    )
    with pytest.raises(ValueError, match="exactly one"):
        client.jobs.reschedule(job["job_id"])
    with pytest.raises(ApiError) as refused:
        client.request("GET", "/jobs", params={"endpoints": "hook"})
    assert (refused.value.status, refused.value.code) == (400, "INVALID_REQUEST")


def test_topics_and_a_fan_out_through_the_sdk(stack: str) -> None:
    client = Client(stack, BOOTSTRAP_KEY)
    spec = {"url": "http://127.0.0.1:9/", "method": "POST"}
    for name in ("a", "b"):
        client.endpoints.create({"name": name, "type": "HTTP", "spec": spec})
    created = client.topics.create({"name": "orders", "endpoints": ["a", "b"]})
    assert client.topics.get("orders") == created
    assert [t["name"] for t in client.topics.list_all()] == ["orders"]
    body = {"topic": "orders", "trigger": "DELAYED", "delay": "1h", "idempotency_key": "k"}
    fanned = client.jobs.create(body)
    assert [j["endpoint"] for j in fanned["jobs"]] == ["a", "b"]
    assert client.jobs.create(body)["jobs"] == fanned["jobs"]
    assert client.jobs.find("b", "topic:orders:k")["job_id"] == fanned["jobs"][1]["job_id"]
    with pytest.raises(Conflict):
        client.endpoints.delete("a")
    assert client.topics.replace("orders", {"endpoints": ["b"]})["endpoints"] == ["b"]
    client.topics.delete("orders")
    with pytest.raises(NotFound) as missing:
        client.topics.get("orders")
    assert missing.value.code == "TOPIC_NOT_FOUND"


def test_a_per_key_limit_and_a_concurrency_key_through_the_sdk(stack: str) -> None:
    client = Client(stack, BOOTSTRAP_KEY)
    spec = {"url": "http://127.0.0.1:9/", "method": "POST"}
    flow = {"max_concurrency_per_key": 3}
    created = client.endpoints.create(
        {"name": "t", "type": "HTTP", "spec": spec, "flow_control": flow}
    )
    assert created["flow_control"] == flow
    body = {"endpoint": "t", "trigger": "DELAYED", "delay": "1h", "idempotency_key": "k"}
    job = client.jobs.create({**body, "concurrency_key": "tenant-1"})
    assert client.jobs.get(job["job_id"])["concurrency_key"] == "tenant-1"
    with pytest.raises(ApiError) as refused:
        client.endpoints.replace(
            "t", {"type": "HTTP", "spec": spec, "flow_control": {"max_concurrency_per_key": 0}}
        )
    assert (refused.value.status, refused.value.code) == (400, "INVALID_REQUEST")
    assert "max_concurrency_per_key" in refused.value.message
