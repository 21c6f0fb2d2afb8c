"""A job's own headers and W3C trace context as POST /jobs accepts them (pure)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from chalicelib.domain.job_headers import (
    MAX_HEADER_BYTES,
    credential_values,
    parse_job_headers,
)
from chalicelib.domain.jobs import parse_job_request
from chalicelib.domain.trace_context import (
    TraceContext,
    attempt_traceparent,
    new_parent_id,
    parse_traceparent,
    trace_context,
)
from chalicelib.errors import ValidationFailed

NOW = datetime(2026, 3, 15, 12, 0, tzinfo=UTC)
TRACE = "0af7651916cd43dd8448eb211c80319c"
PARENT = "00-" + TRACE + "-b7ad6b7169203331-01"


def job(**extra: Any) -> dict[str, Any]:
    return {"endpoint": "ep", "trigger": "IMMEDIATE", "idempotency_key": "k", **extra}


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({"Bad Name": "x"}, "Header 'Bad Name' in 'headers' is not a valid header name"),
        ({"": "x"}, "Header '' in 'headers' is not a valid header name"),
        ({"X:Y": "x"}, "Header 'X:Y' in 'headers' is not a valid header name"),
        ({"X-Tenant": "a\r\nX-Evil: 1"}, "Header 'X-Tenant' in 'headers' has a value with CR"),
        ({"X-Tenant": "a\nb"}, "Header 'X-Tenant' in 'headers' has a value with CR, LF or NUL"),
        ({"X-Tenant": "a\0b"}, "Header 'X-Tenant' in 'headers' has a value with CR, LF or NUL"),
        ({"X-Tenant": 7}, "Header 'X-Tenant' in 'headers' must have a string value"),
        (
            {"X-Task-Executor-Attempt": "9"},
            "Header 'X-Task-Executor-Attempt' in 'headers' is set by the service",
        ),
        (
            {"x-task-executor-anything": "9"},
            "Header 'x-task-executor-anything' in 'headers' is set",
        ),
        ({"Idempotency-Key": "k"}, "Header 'Idempotency-Key' in 'headers' is set by the service"),
        ({"webhook-id": "m"}, "Header 'webhook-id' in 'headers' is set by the service"),
        ({"Webhook-Timestamp": "1"}, "Header 'Webhook-Timestamp' in 'headers' is set by"),
        ({"webhook-signature": "v1,x"}, "Header 'webhook-signature' in 'headers' is set by"),
        ({"Host": "evil.test"}, "Header 'Host' in 'headers' is set by the service"),
        ({"content-length": "1"}, "Header 'content-length' in 'headers' is set by the service"),
        ({"Transfer-Encoding": "chunked"}, "Header 'Transfer-Encoding' in 'headers' is set by"),
        ({"Connection": "close"}, "Header 'Connection' in 'headers' is set by the service"),
        ({f"X-H{i}": "v" for i in range(33)}, "Field 'headers' has 33 headers; at most 32"),
        ({"X-Big": "v" * MAX_HEADER_BYTES}, "Field 'headers' holds 8197 bytes of names and values"),
        (["X-Tenant"], "Field 'headers' must be an object of header names to strings"),
        ("X-Tenant: a", "Field 'headers' must be an object of header names to strings"),
    ],
)
def test_refused_headers_are_400_naming_the_header(headers: Any, message: str) -> None:
    with pytest.raises(ValidationFailed) as info:
        parse_job_request(job(headers=headers), now=NOW)
    assert info.value.status == 400
    assert info.value.code == "INVALID_REQUEST"
    assert message in info.value.message


def test_accepted_headers_at_the_bounds() -> None:
    many = {f"X-H{i}": "v" for i in range(32)}
    assert parse_job_request(job(headers=many), now=NOW).headers == many
    # 8 KiB of names and values exactly (UTF-8 bytes): accepted.
    full = {"X-Big": "é" * ((MAX_HEADER_BYTES - 5) // 2) + "v"}
    assert parse_job_request(job(headers=full), now=NOW).headers == full
    tokens = {"X-Ok!#$%&'*+-.^_`|~09": "a value, with: anything\tbut line breaks"}
    assert parse_job_request(job(headers=tokens), now=NOW).headers == tokens


def test_a_job_without_headers_has_none() -> None:
    request = parse_job_request(job(), now=NOW)
    assert (request.headers, request.trace) == (None, None)
    assert parse_job_request(job(headers={}), now=NOW).headers is None


def test_traceparent_in_headers_is_the_jobs_trace_context_not_a_header() -> None:
    headers = {"TraceParent": PARENT, "tracestate": "congo=t61rcWkgMzE", "X-Tenant": "acme"}
    request = parse_job_request(job(headers=headers), now=NOW)
    assert request.headers == {"X-Tenant": "acme"}
    assert request.trace == TraceContext(PARENT, "congo=t61rcWkgMzE")


def test_the_jobs_own_traceparent_wins_over_the_requests() -> None:
    other = TraceContext("00-" + "1" * 32 + "-" + "2" * 16 + "-00")
    request = parse_job_request(job(headers={"traceparent": PARENT}), now=NOW, trace=other)
    assert request.trace == TraceContext(PARENT)
    assert parse_job_request(job(), now=NOW, trace=other).trace == other


@pytest.mark.parametrize(
    "value",
    [
        "garbage",
        "00-" + TRACE + "-b7ad6b7169203331",  # no flags
        "00-" + TRACE.upper() + "-b7ad6b7169203331-01",  # upper-case hex
        "00-" + "0" * 32 + "-b7ad6b7169203331-01",  # all-zero trace-id
        "00-" + TRACE + "-" + "0" * 16 + "-01",  # all-zero parent-id
        "ff-" + TRACE + "-b7ad6b7169203331-01",  # version ff
        PARENT + "-extra",  # version 00 has exactly four fields
        "0-" + TRACE + "-b7ad6b7169203331-01",
    ],
)
def test_a_malformed_traceparent_is_ignored_with_its_tracestate(value: str) -> None:
    headers = {"traceparent": value, "tracestate": "a=b", "X-Tenant": "acme"}
    request = parse_job_request(job(headers=headers), now=NOW)
    assert request.trace is None
    assert request.headers == {"X-Tenant": "acme"}
    assert trace_context(value, "a=b") is None


def test_a_later_version_is_read_by_its_first_four_fields_and_kept_as_00() -> None:
    assert parse_traceparent("cc-" + TRACE + "-b7ad6b7169203331-01-what-follows") == PARENT
    assert parse_traceparent("cc-" + TRACE + "-b7ad6b7169203331-01") == PARENT


def test_tracestate_past_its_bounds_is_dropped_not_refused() -> None:
    members = ",".join(f"k{i}=v" for i in range(33))
    assert trace_context(PARENT, members) == TraceContext(PARENT, None)
    assert trace_context(PARENT, "x" * 513) == TraceContext(PARENT, None)
    assert trace_context(PARENT, "  ") == TraceContext(PARENT, None)


def test_each_attempt_keeps_trace_id_and_flags_with_a_new_parent_id() -> None:
    ids = {new_parent_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(len(i) == 16 and int(i, 16) != 0 for i in ids)
    sent = attempt_traceparent(PARENT, "00f067aa0ba902b7")
    assert sent == "00-" + TRACE + "-00f067aa0ba902b7-01"
    assert parse_traceparent(sent) == sent


def test_credential_headers_are_what_redaction_hides() -> None:
    headers = {
        "Authorization": "Bearer abc.def.ghi",
        "X-Api-Key": "k-123456",
        "Cookie": "session=s3cr3t",
        "X-Tenant": "acme",
        "Accept": "text/plain",
    }
    values = credential_values(headers)
    assert set(values) == {"Bearer abc.def.ghi", "abc.def.ghi", "k-123456", "session=s3cr3t"}
    assert credential_values(None) == ()
    assert parse_job_headers(None).headers is None
