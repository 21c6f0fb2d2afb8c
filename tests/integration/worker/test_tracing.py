"""OpenTelemetry spans of a job's trace, with the SDK's in-memory exporter: the API call, the
claim and each delivery attempt, and the traceparent each attempt sends to a real HTTP
target on loopback names its attempt's span."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from chalicelib.db.connection import Database
from chalicelib.tracing import Tracing
from chalicelib.wiring.api import ApiRoot
from chalicelib.wiring.process import ProcessRoot
from tests.integration.worker.test_job_headers import RETRY_ONCE, TRACE, TRACEPARENT, fields_of
from tests.integration.worker.test_payloads import http
from tests.support.api_client import ApiClient
from tests.support.factories import register_endpoint
from tests.support.served import HttpTarget, Reply
from tests.support.worker_runs import settle


@pytest.fixture
def exporter(chalice_app: Any, roots: Any) -> Any:
    """The API serving from a process whose tracing exports to memory; yields the exporter
    and the tracing the worker is given."""
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracing = Tracing(provider)
    root = ProcessRoot(tracing=tracing)
    roots.built.append(root)
    chalice_app.use(ApiRoot(root))
    yield spans, tracing
    provider.shutdown()


def test_api_call_claim_and_attempts_are_spans_of_the_callers_trace(
    api: ApiClient, database: Database, make_worker: Any, http_target: HttpTarget, exporter: Any
) -> None:
    spans, tracing = exporter
    register_endpoint(api, "otel", spec=http(http_target, "otel"), retry_policy=RETRY_ONCE)
    http_target.script("/otel", Reply(500, body="again"), Reply(200, body="ok"))
    body = {"endpoint": "otel", "trigger": "IMMEDIATE", "idempotency_key": "traced"}

    reply = api.post("/jobs", body, headers={"traceparent": TRACEPARENT})
    assert reply.status == 201, reply.body
    settle(make_worker(tracing=tracing), database, [reply.body["execution"]["execution_id"]])

    finished = spans.get_finished_spans()
    assert {s.context.trace_id for s in finished} == {int(TRACE, 16)}
    [call] = [s for s in finished if s.name == "POST /jobs"]
    assert call.kind is SpanKind.SERVER
    assert call.parent is not None and call.parent.span_id == int("00f067aa0ba902b7", 16)
    claims = [s for s in finished if s.name == "claim"]
    tries = [s for s in finished if s.name == "attempt"]
    assert len(claims) == 2 and len(tries) == 2
    for span in claims + tries:
        assert span.parent is not None and span.parent.span_id == call.context.span_id
    assert [t.attributes["te.attempt"] for t in tries] == [1, 2]
    assert tries[0].status.is_ok is False and tries[1].status.is_ok is True
    # Each attempt's traceparent names its own span as the parent.
    sent = [fields_of(r.headers["traceparent"])[2] for r in http_target.received("/otel")]
    assert sent == [f"{t.context.span_id:016x}" for t in tries]


def test_a_job_without_trace_context_starts_one_at_the_api_call(
    api: ApiClient, database: Database, make_worker: Any, http_target: HttpTarget, exporter: Any
) -> None:
    spans, tracing = exporter
    register_endpoint(api, "otel-root", spec=http(http_target, "otel-root"))
    body = {"endpoint": "otel-root", "trigger": "IMMEDIATE", "idempotency_key": "root"}

    reply = api.post("/jobs", body, headers={"traceparent": "not-a-traceparent"})
    assert reply.status == 201, reply.body
    settle(make_worker(tracing=tracing), database, [reply.body["execution"]["execution_id"]])

    [call] = [s for s in spans.get_finished_spans() if s.name == "POST /jobs"]
    assert call.parent is None
    [request] = http_target.received("/otel-root")
    assert fields_of(request.headers["traceparent"])[1] == f"{call.context.trace_id:032x}"
