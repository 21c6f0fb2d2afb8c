"""Dead letters, retry and redrive: what the requests mean, without I/O.

A dead letter is a FAILED execution. ``GET /executions`` lists executions across jobs
(FAILED is the dead-letter view), filtered by status, endpoint, a ``created_at`` range and
the last attempt's error type. ``POST /endpoints/{name}/redrive`` requeues an endpoint's
dead letters in a required range, optionally of one error type. Both use the same filters
on the same time (``created_at``), so a redrive moves exactly what the view showed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from chalicelib.domain.jobs import parse_instant
from chalicelib.domain.statuses import ExecutionStatus
from chalicelib.errors import ValidationFailed

#: ``attempts.error.type`` values are upper-case words (TIMEOUT, HTTP_ERROR, WORKER_LOST...).
#: Checked by shape, not against a list, so a type added later can be filtered on.
ERROR_TYPE = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
#: Rows requeued per transaction by a redrive.
REDRIVE_BATCH = 500
#: Rows requeued per request at most ("nothing unbounded runs inside a request"); a redrive
#: that leaves more answers ``"more": true`` and the client calls again.
REDRIVE_MAX_PER_REQUEST = 5000
_REDRIVE_FIELDS = frozenset({"since", "until", "error_type", "endpoint_version"})
#: Which definition of its endpoint a retried execution is delivered with: its job's copy
#: (the default, as for every run of the job) or the endpoint as it is now.
ENDPOINT_VERSIONS = ("snapshot", "current")


@dataclass(frozen=True, kw_only=True)
class ExecutionFilter:
    """The filters of ``GET /executions`` (each optional)."""

    statuses: tuple[str, ...]  #: the status asked for, else every status
    endpoint: str | None = None
    since: datetime | None = None  #: created_at >= since
    until: datetime | None = None  #: created_at < until
    error_type: str | None = None  #: the last attempt's error type

    def params(self) -> dict[str, Any]:
        return {
            "statuses": list(self.statuses),
            "endpoint": self.endpoint,
            "since": self.since,
            "until": self.until,
            "error_type": self.error_type,
        }


@dataclass(frozen=True, kw_only=True)
class RedriveRequest:
    """``POST /endpoints/{name}/redrive``: a required range and an optional error type."""

    since: datetime
    until: datetime
    error_type: str | None = None
    endpoint_version: str = "snapshot"  #: :data:`ENDPOINT_VERSIONS`

    def params(self) -> dict[str, Any]:
        return {"since": self.since, "until": self.until, "error_type": self.error_type}


def parse_error_type(value: object, name: str = "error_type") -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not ERROR_TYPE.fullmatch(value):
        raise ValidationFailed(
            f"{name} must be an error type such as HTTP_ERROR or TIMEOUT "
            f"(upper-case letters, digits, '_'; at most 64), got {value!r}."
        )
    return value


def _check_range(since: datetime | None, until: datetime | None) -> None:
    if since is not None and until is not None and since >= until:
        raise ValidationFailed("since must be earlier than until.")


def parse_execution_filter(params: Mapping[str, str] | None) -> ExecutionFilter:
    """The query of ``GET /executions``; 400 INVALID_REQUEST on any bad value."""
    params = params or {}
    raw_status = params.get("status")
    if raw_status is None:
        statuses = tuple(s.value for s in ExecutionStatus)
    else:
        try:
            statuses = (ExecutionStatus(raw_status).value,)
        except ValueError as exc:
            allowed = ", ".join(s.value for s in ExecutionStatus)
            raise ValidationFailed(f"status must be one of {allowed}, got {raw_status!r}.") from exc
    endpoint = params.get("endpoint")
    if endpoint is not None and not endpoint.strip():
        raise ValidationFailed("endpoint must be a non-empty endpoint name.")
    since = _instant(params, "since")
    until = _instant(params, "until")
    _check_range(since, until)
    return ExecutionFilter(
        statuses=statuses,
        endpoint=endpoint,
        since=since,
        until=until,
        error_type=parse_error_type(params.get("error_type")),
    )


def _instant(params: Mapping[str, Any], name: str) -> datetime | None:
    value = params.get(name)
    return None if value is None else parse_instant(value, name)


def parse_redrive_request(body: object) -> RedriveRequest:
    """The body of a redrive: ``since`` and ``until`` required, ``since < until``."""
    if not isinstance(body, Mapping):
        raise ValidationFailed("The request body must be a JSON object.")
    unknown = sorted(set(body) - _REDRIVE_FIELDS)
    if unknown:
        raise ValidationFailed(f"Unknown field(s) for a redrive: {', '.join(unknown)}.")
    for name in ("since", "until"):
        if body.get(name) is None:
            raise ValidationFailed(f"Field '{name}' is required: a redrive needs a time range.")
    since = parse_instant(body["since"], "since")
    until = parse_instant(body["until"], "until")
    _check_range(since, until)
    return RedriveRequest(
        since=since,
        until=until,
        error_type=parse_error_type(body.get("error_type")),
        endpoint_version=parse_endpoint_version(body),
    )


def parse_retry_request(body: object) -> str:
    """The body of ``POST /executions/{id}/retry`` (optional): its ``endpoint_version``."""
    if body is None:
        return "snapshot"
    if not isinstance(body, Mapping):
        raise ValidationFailed("The request body must be a JSON object.")
    unknown = sorted(set(body) - {"endpoint_version"})
    if unknown:
        raise ValidationFailed(f"Unknown field(s) for a retry: {', '.join(unknown)}.")
    return parse_endpoint_version(body)


def parse_endpoint_version(body: Mapping[str, Any]) -> str:
    """``endpoint_version``: "snapshot" (the default) or "current"; 400 otherwise."""
    value = body.get("endpoint_version")
    if value is None:
        return "snapshot"
    if value not in ENDPOINT_VERSIONS or not isinstance(value, str):
        raise ValidationFailed(
            "Field 'endpoint_version' must be one of "
            + ", ".join(f'"{v}"' for v in ENDPOINT_VERSIONS)
            + f", got {value!r}."
        )
    return value
