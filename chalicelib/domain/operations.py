"""Bulk actions on executions: what ``POST /executions/bulk`` means, without I/O.

A bulk action is ``{"action": "retry" | "cancel" | "delete", "filter": {...}}``. Its
filter takes the fields of ``GET /executions`` in the request body's words: ``endpoint``,
``status`` (one status or a list), ``error_type``, ``created_after`` (inclusive) and
``created_before`` (exclusive). An empty filter means every execution, which a client must
say in so many words: ``"all": true`` beside it (and only beside an empty one).

``POST /executions/bulk/count`` takes the same filter (``{"filter": {...}, "all": ...}``,
the same rules) and answers how many executions it matches now, up to
:data:`COUNT_LIMIT` ("more than" past it), so a client can say what an action will touch
before it is created.

The set an action works through is fixed when it is created: the executions matching the
filter and created before the operation was (:meth:`BulkFilter.execution_filter`). Which of
them each action applies to is the single-execution route's rule (retry: FAILED; cancel:
PENDING, QUEUED, RETRYING; delete: SUCCESS, FAILED, CANCELLED); the others are refused and
counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from chalicelib.domain.dead_letters import ExecutionFilter, parse_error_type
from chalicelib.domain.jobs import parse_instant
from chalicelib.domain.statuses import ExecutionStatus
from chalicelib.errors import ValidationFailed


class BulkAction(StrEnum):
    """What a bulk operation does to each execution of its set."""

    RETRY = "retry"  #: FAILED -> QUEUED with a new attempt budget (POST /executions/{id}/retry)
    CANCEL = "cancel"  #: PENDING, QUEUED or RETRYING -> CANCELLED (POST /executions/{id}/cancel)
    DELETE = "delete"  #: an ended execution removed with its attempts and logs


class OperationState(StrEnum):
    """Where a bulk operation is."""

    RUNNING = "RUNNING"  #: pages are still being worked through
    DONE = "DONE"  #: every page was worked through
    ABORTED = "ABORTED"  #: stopped by POST /operations/{id}/abort
    FAILED = "FAILED"  #: a page failed in a way a retry will not fix (see ``error``)


_FIELDS = frozenset({"action", "filter", "all"})
_COUNT_FIELDS = frozenset({"filter", "all"})
#: Executions a count reads at most: past it the answer is "more than COUNT_LIMIT".
COUNT_LIMIT = 1000
_FILTER_FIELDS = frozenset({"endpoint", "status", "error_type", "created_after", "created_before"})
_ALL_STATUSES = tuple(s.value for s in ExecutionStatus)


@dataclass(frozen=True, kw_only=True)
class BulkFilter:
    """A bulk action's filter, normalized; every field optional (none: every execution)."""

    endpoint: str | None = None
    statuses: tuple[str, ...] = _ALL_STATUSES
    error_type: str | None = None
    created_after: datetime | None = None  #: created_at >= created_after
    created_before: datetime | None = None  #: created_at < created_before

    def to_json(self) -> dict[str, Any]:
        """As stored with the operation and shown by GET /operations/{id}."""
        return {
            "endpoint": self.endpoint,
            "status": list(self.statuses),
            "error_type": self.error_type,
            "created_after": _iso(self.created_after),
            "created_before": _iso(self.created_before),
        }

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> BulkFilter:
        return cls(
            endpoint=stored.get("endpoint"),
            statuses=tuple(stored.get("status") or _ALL_STATUSES),
            error_type=stored.get("error_type"),
            created_after=_instant(stored.get("created_after")),
            created_before=_instant(stored.get("created_before")),
        )

    def execution_filter(self, fixed_at: datetime | None = None) -> ExecutionFilter:
        """The GET /executions filter of this set: created before ``fixed_at`` (the
        operation's creation) too, so what is created afterwards is never in it; without
        ``fixed_at``, what the filter matches now (a count)."""
        until = self.created_before
        if fixed_at is not None:
            until = fixed_at if until is None else min(until, fixed_at)
        return ExecutionFilter(
            statuses=self.statuses,
            endpoint=self.endpoint,
            since=self.created_after,
            until=until,
            error_type=self.error_type,
        )


@dataclass(frozen=True, kw_only=True)
class BulkRequest:
    """``POST /executions/bulk`` as parsed."""

    action: BulkAction
    filter: BulkFilter


def parse_bulk_request(body: object) -> BulkRequest:
    """The body of ``POST /executions/bulk``; 400 INVALID_REQUEST naming what is wrong."""
    body = _object(body)
    _refuse_unknown(body, _FIELDS, "a bulk action")
    action = _parse_action(body.get("action"))
    return BulkRequest(action=action, filter=_parse_selection(body))


def parse_bulk_count_request(body: object) -> BulkFilter:
    """The body of ``POST /executions/bulk/count``: a bulk action's filter (and ``all``)
    without its action, checked by the same rules; 400 INVALID_REQUEST naming what is
    wrong."""
    body = _object(body)
    _refuse_unknown(body, _COUNT_FIELDS, "a bulk count")
    return _parse_selection(body)


def _object(body: object) -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        raise ValidationFailed("The request body must be a JSON object.")
    return body


def _parse_selection(body: Mapping[str, Any]) -> BulkFilter:
    """``filter`` and ``all``: an empty filter only with ``"all": true`` beside it."""
    raw_filter = body.get("filter", {})
    if not isinstance(raw_filter, Mapping):
        raise ValidationFailed("Field 'filter' must be a JSON object.")
    _refuse_unknown(raw_filter, _FILTER_FIELDS, "a bulk filter")
    every = body.get("all", False)
    if not isinstance(every, bool):
        raise ValidationFailed("Field 'all' must be true or false.")
    given = {k: v for k, v in raw_filter.items() if v is not None}
    if not given and not every:
        raise ValidationFailed(
            'An empty filter acts on every execution: give filter fields, or "all": true '
            "beside an empty filter to mean every execution."
        )
    if given and every:
        raise ValidationFailed('"all": true means every execution: it takes an empty filter.')
    return parse_bulk_filter(given)


def parse_bulk_filter(raw: Mapping[str, Any]) -> BulkFilter:
    """A bulk filter's fields (known ones only, non-null), each checked."""
    endpoint = raw.get("endpoint")
    if endpoint is not None and (not isinstance(endpoint, str) or not endpoint.strip()):
        raise ValidationFailed("filter.endpoint must be a non-empty endpoint name.")
    after = _parse_optional_instant(raw, "created_after")
    before = _parse_optional_instant(raw, "created_before")
    if after is not None and before is not None and after >= before:
        raise ValidationFailed("filter.created_after must be earlier than filter.created_before.")
    return BulkFilter(
        endpoint=endpoint,
        statuses=_parse_statuses(raw.get("status")),
        error_type=parse_error_type(raw.get("error_type"), "filter.error_type"),
        created_after=after,
        created_before=before,
    )


def _parse_action(raw: object) -> BulkAction:
    allowed = [a.value for a in BulkAction]
    if not isinstance(raw, str) or raw not in allowed:
        raise ValidationFailed(f"Field 'action' must be one of {', '.join(allowed)}, got {raw!r}.")
    return BulkAction(raw)


def _parse_statuses(raw: object) -> tuple[str, ...]:
    """One status or a non-empty list of them, deduplicated in the table's order."""
    if raw is None:
        return _ALL_STATUSES
    values = [raw] if isinstance(raw, str) else raw
    if not isinstance(values, list) or not values:
        raise ValidationFailed("filter.status must be a status or a non-empty list of statuses.")
    allowed = ", ".join(_ALL_STATUSES)
    for value in values:
        if value not in _ALL_STATUSES:
            raise ValidationFailed(f"filter.status must be one of {allowed}, got {value!r}.")
    return tuple(s for s in _ALL_STATUSES if s in values)


def _parse_optional_instant(raw: Mapping[str, Any], name: str) -> datetime | None:
    value = raw.get(name)
    return None if value is None else parse_instant(value, f"filter.{name}")


def _refuse_unknown(body: Mapping[str, Any], known: frozenset[str], what: str) -> None:
    unknown = sorted(str(k) for k in set(body) - known)
    if unknown:
        raise ValidationFailed(f"Unknown field(s) for {what}: {', '.join(unknown)}.")


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def _instant(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)
