"""``te jobs create`` and ``te batch create`` (over the SDK) with a job's own headers, its
trace context and an input that is not an object, delivered by the local stack's worker to
a real HTTP target on loopback."""

from __future__ import annotations

import json

from tests.integration.cli.test_cli import endpoint
from tests.support.cli import Te
from tests.support.served import HttpTarget, Reply
from tests.support.waiting import wait_for

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE}-00f067aa0ba902b7-01"


def test_jobs_and_batches_carry_headers_trace_and_any_json_input(
    te: Te, http_target: HttpTarget
) -> None:
    http_target.script("/ok", Reply(200, body="ok"))
    endpoint(te, http_target)
    body = {
        "endpoint": "hook",
        "trigger": "IMMEDIATE",
        "idempotency_key": "h1",
        "input": ["a", 1],
        "headers": {"X-Tenant": "acme"},
    }
    te.json(
        "jobs",
        "create",
        "-f",
        te.file("j.json", body),
        "--traceparent",
        TRACEPARENT,
        "--tracestate",
        "k=v",
    )
    line = {"endpoint": "hook", "trigger": "IMMEDIATE", "idempotency_key": "b1", "input": 5}
    te.ok(
        "batch", "create", te.file("b.jsonl", json.dumps(line) + "\n"), "--traceparent", TRACEPARENT
    )

    received = wait_for(
        lambda: http_target.received("/ok"),
        "two deliveries",
        until=lambda r: len(r) == 2,
        timeout=60,
    )
    by_body = {r.body: r.headers for r in received}
    job = by_body[b'["a",1]']
    assert job["x-tenant"] == "acme"
    assert job["traceparent"].split("-")[1] == TRACE
    assert job["traceparent"].split("-")[2] != "00f067aa0ba902b7"
    assert job["tracestate"] == "k=v"
    assert by_body[b"5"]["traceparent"].split("-")[1] == TRACE
