"""A job's own headers (``POST /jobs`` ``"headers"``): what is accepted, and what must
never be recorded.

Values are literal strings (no templates), sent with every delivery of the job: HTTP
request headers (over the endpoint's header of the same name, in any case), Kafka record
headers, and Redis Stream fields named ``header:<name>`` (:data:`REDIS_FIELD_PREFIX`: a
stream entry has no headers, and the prefix keeps them apart from the endpoint's
``fields_template`` and the service's own fields).

Refused with 400 naming the header (:func:`parse_job_headers`): a name that is not an HTTP
token (RFC 9110); a value that is not a string or holds CR, LF or NUL; the names the
service owns (:data:`RESERVED_NAMES`, :data:`RESERVED_PREFIXES`); more than
:data:`MAX_HEADERS` headers or :data:`MAX_HEADER_BYTES` in all (names and values, UTF-8).

``traceparent`` and ``tracestate`` are the job's trace context, not plain headers
(:mod:`chalicelib.domain.trace_context`): they are taken out, and a malformed
``traceparent`` is ignored rather than refused.

Headers are not secrets, but some carry credentials (``Authorization``, a token): the
values of those (:func:`credential_values`) are redacted from what a delivery records, as
secret values are, and the API never shows a job's headers back.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chalicelib.domain.trace_context import TRACEPARENT, TRACESTATE, TraceContext, trace_context
from chalicelib.errors import ValidationFailed

MAX_HEADERS = 32
MAX_HEADER_BYTES = 8 * 1024
#: Header names the service sets itself (lower case): its identity and signature headers,
#: and those that frame or route the request.
RESERVED_NAMES = frozenset(
    {"idempotency-key", "host", "content-length", "transfer-encoding", "connection"}
)
#: Prefixes of the service's own headers: ``X-Task-Executor-*`` and Standard Webhooks'
#: ``webhook-id``, ``webhook-timestamp``, ``webhook-signature`` (the whole ``webhook-*``).
RESERVED_PREFIXES = ("x-task-executor-", "webhook-")
#: A Redis Stream entry carries header ``name`` as the field ``header:name``.
REDIS_FIELD_PREFIX = "header:"

# RFC 9110 token: one or more tchar.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_FORBIDDEN_IN_VALUE = re.compile("[\r\n\0]")
#: Words in a header name that say its value is a credential (matched in lower case).
_CREDENTIAL_WORDS = (
    "auth",
    "token",
    "secret",
    "key",
    "password",
    "passwd",
    "cookie",
    "session",
    "signature",
    "credential",
)


@dataclass(frozen=True, kw_only=True)
class JobHeaders:
    """A job's accepted headers (None: none) and the trace context they carried."""

    headers: dict[str, str] | None = None
    trace: TraceContext | None = None


def parse_job_headers(value: Any) -> JobHeaders:
    """Validate ``"headers"`` (see the module); ``traceparent`` and ``tracestate`` come
    back as the trace context, never among the headers."""
    if value is None:
        return JobHeaders()
    if not isinstance(value, dict):
        raise ValidationFailed("Field 'headers' must be an object of header names to strings.")
    if len(value) > MAX_HEADERS:
        raise ValidationFailed(
            f"Field 'headers' has {len(value)} headers; at most {MAX_HEADERS} are accepted."
        )
    size = 0
    for name, text in value.items():
        _check_header(name, text)
        size += len(name.encode()) + len(text.encode())
    if size > MAX_HEADER_BYTES:
        raise ValidationFailed(
            f"Field 'headers' holds {size} bytes of names and values; at most "
            f"{MAX_HEADER_BYTES} are accepted."
        )
    plain = {n: v for n, v in value.items() if n.lower() not in (TRACEPARENT, TRACESTATE)}
    return JobHeaders(headers=plain or None, trace=_trace_of(value))


def _check_header(name: str, value: Any) -> None:
    shown = repr(name[:64])
    if not _TOKEN.fullmatch(name):
        raise ValidationFailed(
            f"Header {shown} in 'headers' is not a valid header name (an HTTP token: letters, "
            "digits and !#$%&'*+-.^_`|~)."
        )
    lowered = name.lower()
    if lowered in RESERVED_NAMES or lowered.startswith(RESERVED_PREFIXES):
        raise ValidationFailed(
            f"Header {shown} in 'headers' is set by the service and cannot be given by a job "
            "(reserved: X-Task-Executor-*, Idempotency-Key, webhook-*, Host, Content-Length, "
            "Transfer-Encoding, Connection)."
        )
    if not isinstance(value, str):
        raise ValidationFailed(f"Header {shown} in 'headers' must have a string value.")
    if _FORBIDDEN_IN_VALUE.search(value):
        raise ValidationFailed(f"Header {shown} in 'headers' has a value with CR, LF or NUL.")


def _trace_of(headers: Mapping[str, str]) -> TraceContext | None:
    parent = state = None
    for name, text in headers.items():
        lowered = name.lower()
        if lowered == TRACEPARENT:
            parent = text
        elif lowered == TRACESTATE:
            state = text
    return None if parent is None else trace_context(parent, state)


def is_credential(name: str) -> bool:
    """Whether a header's value is treated as a credential (redacted where recorded)."""
    lowered = name.lower()
    return any(word in lowered for word in _CREDENTIAL_WORDS)


def credential_values(headers: Mapping[str, str] | None) -> tuple[str, ...]:
    """The values of ``headers`` that are credentials (:func:`is_credential`), each with
    its last word alone too (``Bearer abc`` hides ``abc`` wherever it is echoed)."""
    if not headers:
        return ()
    values: list[str] = []
    for name, value in headers.items():
        if value and is_credential(name):
            values.append(value)
            scheme, _, credential = value.partition(" ")
            if credential.strip() and scheme:
                values.append(credential.strip())
    return tuple(values)
