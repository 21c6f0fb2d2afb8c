"""What a delivery produced: the spec's output and error shapes, per transport.

Dispatchers never raise for a failed delivery; they return a :class:`DeliveryOutcome`
built with :func:`succeeded` or :func:`failed`, so the pipeline handles every transport's
result the same way. Error shapes are exactly the spec's::

    {"type": "TIMEOUT", "message": "..."}
    {"type": "HTTP_ERROR", "status_code": 503, "message": "..."}
    {"type": "CONNECTION_ERROR" | "BROKER_ERROR" | "STREAM_ERROR", "message": "..."}
    {"type": "TEMPLATE_RESOLUTION_FAILED" | "REQUEST_TOO_LARGE", "message": "..."}
    {"type": "INTERNAL_ERROR", "message": "..."}
    {"type": "EXPIRED", "message": "..."}
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from chalicelib.domain.redaction import Redactor, redactor
from chalicelib.domain.signing import SigningKeys


class DeliveryErrorType(StrEnum):
    """``attempts.error.type`` values."""

    TIMEOUT = "TIMEOUT"  #: no answer within timeout_ms (any transport)
    HTTP_ERROR = "HTTP_ERROR"  #: the target answered with a status not expected
    CONNECTION_ERROR = "CONNECTION_ERROR"  #: HTTP/Redis connection failed or was refused
    BROKER_ERROR = "BROKER_ERROR"  #: Kafka broker unreachable or rejected the record
    STREAM_ERROR = "STREAM_ERROR"  #: Redis rejected the XADD (wrong type, bad MAXLEN...)
    TEMPLATE_RESOLUTION_FAILED = "TEMPLATE_RESOLUTION_FAILED"  #: request could not be built
    #: the rendered request would pass :data:`MAX_REQUEST_BYTES`; not retried
    REQUEST_TOO_LARGE = "REQUEST_TOO_LARGE"
    #: the delivery raised an error no dispatcher anticipated (retried as the policy allows)
    INTERNAL_ERROR = "INTERNAL_ERROR"
    #: not started within its job's expire_after of its due time: never sent, not retried
    EXPIRED = "EXPIRED"


#: The largest rendered request (the resolved endpoint spec as compact JSON: HTTP URL,
#: headers and body; Kafka key, value and headers; Redis fields): four times the 1 MiB the
#: API accepts as input, so ``{{input}}`` always fits, even escaped, while a template that
#: repeats a large value cannot make the worker build a request of any size.
MAX_REQUEST_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class DeliveryOutcome:
    """Result of one dispatch: ``output`` on success, ``error`` otherwise.

    ``retryable`` is False for failures a retry would repeat (template, SSRF refusal,
    header injection); ``retry_after_ms`` carries an HTTP ``Retry-After`` (429/503).
    """

    ok: bool
    output: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    retryable: bool = True
    retry_after_ms: int | None = None

    @property
    def error_type(self) -> str | None:
        return None if self.error is None else str(self.error["type"])

    def redacted(self, secrets: Iterable[str]) -> DeliveryOutcome:
        """A copy fit to record: secret values redacted in every encoding, then bounded,
        then made storable (:func:`storable`).

        A target may echo a header back in its body (raw, JSON-escaped, percent-encoded,
        base64), and library messages may quote the request; none of it may reach the
        attempts table. Redaction runs before the cut (:data:`OUTPUT_BODY_LIMIT`,
        :data:`ERROR_MESSAGE_LIMIT`), so a cut never leaves the start of a secret behind.
        Dispatchers return text uncut for this reason.
        """
        scrub = redactor(secrets)
        return DeliveryOutcome(
            ok=self.ok,
            output=_bounded(self.output, scrub, OUTPUT_BODY_LIMIT),
            error=_bounded(self.error, scrub, ERROR_MESSAGE_LIMIT),
            retryable=self.retryable,
            retry_after_ms=self.retry_after_ms,
        )


#: Characters of a response body kept in an attempt's output.
OUTPUT_BODY_LIMIT = 4096
#: Characters of an error message kept in an attempt's error.
ERROR_MESSAGE_LIMIT = 400
_CUT_FIELDS = ("body", "message")


def _bounded(shape: dict[str, Any] | None, scrub: Redactor, limit: int) -> dict[str, Any] | None:
    if shape is None:
        return None
    return {
        storable(str(key)): storable(scrub.cut(value, limit))
        if key in _CUT_FIELDS and isinstance(value, str)
        else _storable_tree(_scrub(value, scrub))
        for key, value in shape.items()
    }


#: What PostgreSQL's TEXT and JSONB refuse: NUL (``\u0000`` in JSONB too) and the UTF-16
#: surrogates, which no UTF-8 text can hold (Python keeps lone ones from ``surrogateescape``
#: or a JSON ``"\ud800"``).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
#: What replaces them: U+FFFD, as for bytes that are not UTF-8 when a body is decoded.
REPLACEMENT = "\ufffd"


def storable(text: str) -> str:
    """``text`` with every character the database refuses replaced by U+FFFD.

    A target's answer is recorded whatever bytes it holds: a 2xx with a NUL in its body is
    a success, and its output must not make the attempt's record fail.
    """
    return _UNSTORABLE.sub(REPLACEMENT, text) if _UNSTORABLE.search(text) else text


def _storable_tree(value: Any) -> Any:
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, dict):
        return {storable(str(k)): _storable_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_storable_tree(v) for v in value]
    return value


def _scrub(value: Any, scrub: Redactor) -> Any:
    if isinstance(value, str):
        return scrub.redact(value)
    if isinstance(value, dict):
        return {k: _scrub(v, scrub) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, scrub) for v in value]
    return value


def succeeded(output: dict[str, Any]) -> DeliveryOutcome:
    return DeliveryOutcome(ok=True, output=output)


def failed(
    error_type: DeliveryErrorType,
    message: str,
    *,
    retryable: bool = True,
    retry_after_ms: int | None = None,
    **extra: Any,
) -> DeliveryOutcome:
    """A failed delivery with the spec's error shape (``extra``: e.g. ``status_code``)."""
    error: dict[str, Any] = {"type": str(error_type), **extra, "message": message}
    return DeliveryOutcome(
        ok=False, error=error, retryable=retryable, retry_after_ms=retry_after_ms
    )


@dataclass(frozen=True, kw_only=True)
class DeliveryRequest:
    """A resolved endpoint spec plus the identity every delivery carries; ``signing`` holds
    the keys of a signed endpoint (dispatchers sign what they send with
    :func:`chalicelib.domain.signing.webhook_headers`)."""

    execution_id: str
    attempt: int
    spec: dict[str, Any] = field(default_factory=dict)
    signing: SigningKeys | None = None
    #: The job's own headers (:mod:`chalicelib.domain.job_headers`), sent after the spec's.
    headers: Mapping[str, str] | None = None
    #: This attempt's W3C ``traceparent`` (the job's trace-id, a parent-id of its own) and
    #: the job's ``tracestate`` (:mod:`chalicelib.domain.trace_context`).
    traceparent: str | None = None
    tracestate: str | None = None
    #: ``spec["body_template"]`` rendered as text (a form, XML or plain text body) rather
    #: than a JSON value (:func:`chalicelib.domain.body_text.text_encoder`).
    text_body: bool = False

    def put_trace_context(self, into: MutableMapping[str, str]) -> None:
        """This attempt's trace context written into headers or stream fields, over any of
        the same name: ``traceparent``, and ``tracestate`` only with it."""
        if self.traceparent is not None:
            into["traceparent"] = self.traceparent
            if self.tracestate is not None:
                into["tracestate"] = self.tracestate
