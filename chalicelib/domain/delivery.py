"""What a delivery produced: the spec's output and error shapes, per transport.

Dispatchers never raise for a failed delivery; they return a :class:`DeliveryOutcome`
built with :func:`succeeded` or :func:`failed`, so the pipeline handles every transport's
result the same way. Error shapes are exactly the spec's::

    {"type": "TIMEOUT", "message": "..."}
    {"type": "HTTP_ERROR", "status_code": 503, "message": "..."}
    {"type": "CONNECTION_ERROR" | "BROKER_ERROR" | "STREAM_ERROR", "message": "..."}
    {"type": "TEMPLATE_RESOLUTION_FAILED", "message": "..."}
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class DeliveryErrorType(StrEnum):
    """``attempts.error.type`` values."""

    TIMEOUT = "TIMEOUT"  #: no answer within timeout_ms (any transport)
    HTTP_ERROR = "HTTP_ERROR"  #: the target answered with a status not expected
    CONNECTION_ERROR = "CONNECTION_ERROR"  #: HTTP/Redis connection failed or was refused
    BROKER_ERROR = "BROKER_ERROR"  #: Kafka broker unreachable or rejected the record
    STREAM_ERROR = "STREAM_ERROR"  #: Redis rejected the XADD (wrong type, bad MAXLEN...)
    TEMPLATE_RESOLUTION_FAILED = "TEMPLATE_RESOLUTION_FAILED"  #: request could not be built


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
        """A copy whose output/error strings no longer contain any of ``secrets``.

        A target may echo a header back in its body, and library messages may quote the
        request; neither may reach the attempts table.
        """
        values = sorted({s for s in secrets if s}, key=len, reverse=True)
        if not values:
            return self
        return DeliveryOutcome(
            ok=self.ok,
            output=_scrub(self.output, values),
            error=_scrub(self.error, values),
            retryable=self.retryable,
            retry_after_ms=self.retry_after_ms,
        )


REDACTED = "[REDACTED]"


def _scrub(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, dict):
        return {k: _scrub(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, secrets) for v in value]
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
    """A resolved endpoint spec plus the identity every delivery carries."""

    execution_id: str
    attempt: int
    spec: dict[str, Any] = field(default_factory=dict)
