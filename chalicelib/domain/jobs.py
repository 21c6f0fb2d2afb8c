"""Jobs, pure: request validation and endpoint snapshots (health: :mod:`.health`).

Nothing here touches the database or the environment; services call these with what they
read and raise what these raise.

Decisions recorded here (and in the README):

* ``idempotency_key`` is required for IMMEDIATE and DELAYED and *optional* for CRON, where
  it deduplicates retried creations the same way (a repeat returns the existing job, 200).
* A repeat of a known ``(endpoint, idempotency_key)`` returns the existing job with 200 even
  when the body differs: the key names the request, the first body wins.
* A DELAYED job is given ``run_at`` or ``delay`` (a duration, :func:`parse_duration`), never
  both: ``run_at`` is then the service's clock at parsing plus the delay.
* A DELAYED ``run_at`` in the past is accepted; the execution is created PENDING with that
  ``run_at`` and the delayed promoter queues it on its next pass (within
  ``TE_PROMOTE_INTERVAL_MS``), so every DELAYED execution follows PENDING -> QUEUED.
* A CRON job's first tick is the first one at or after ``max(starts_at, now)``: creating a
  job with a past ``starts_at`` never backfills ticks from before its creation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from chalicelib.domain import cron
from chalicelib.domain.job_delivery import DELIVERY_FIELDS, parse_delivery_overrides
from chalicelib.domain.job_headers import parse_job_headers
from chalicelib.domain.statuses import JobStatus, TriggerType
from chalicelib.domain.timefmt import EARLIEST_INSTANT, LATEST_INSTANT, in_range, parse_duration
from chalicelib.domain.trace_context import TraceContext
from chalicelib.errors import InvalidCron, ValidationFailed

MAX_IDEMPOTENCY_KEY_LENGTH = 255
#: The longest ``ordering_key`` (executions of one endpoint sharing it start one at a time)
#: and ``concurrency_key`` (at most the endpoint's max_concurrency_per_key of them run).
MAX_ORDERING_KEY_LENGTH = 200

_COMMON_FIELDS = frozenset(
    {
        "endpoint",
        "trigger",
        "idempotency_key",
        "input",
        "on_success",
        "on_failure",
        "headers",
        "ordering_key",
        "concurrency_key",
    }
)
TRIGGER_FIELDS: dict[TriggerType, frozenset[str]] = {
    TriggerType.IMMEDIATE: _COMMON_FIELDS | DELIVERY_FIELDS,
    TriggerType.DELAYED: _COMMON_FIELDS | DELIVERY_FIELDS | {"run_at", "delay"},
    TriggerType.CRON: _COMMON_FIELDS | {"cron", "timezone", "starts_at", "ends_at"},
}
CRON_UPDATE_FIELDS = frozenset({"cron", "timezone", "input", "starts_at", "ends_at"})
#: What ``PUT /jobs/{job_id}`` of a DELAYED job may give: its new time, exactly one of them.
RESCHEDULE_FIELDS = frozenset({"run_at", "delay"})


@dataclass(frozen=True, kw_only=True)
class CronSchedule:
    """A validated schedule: normalized expression, zone and window."""

    expression: str
    timezone: str
    starts_at: datetime
    ends_at: datetime | None

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def first_run(self, now: datetime) -> datetime:
        """First tick at or after ``max(starts_at, now)`` (no backfill before creation).

        When the schedule ends first, ``ends_at``: the materializer's retirement tick. A
        schedule without an end whose next tick falls past the supported range of time
        is 422 INVALID_CRON: it would never fire.
        """
        start = max(self.starts_at, now)
        tick = cron.first_tick_in_range(self.expression, self.zone, start)
        if self.ends_at is not None:
            return self.ends_at if tick is None else min(tick, self.ends_at)
        if tick is None:
            raise InvalidCron(
                f"Cron expression {self.expression!r} in {self.timezone} never fires between "
                f"{_bound(start.astimezone(UTC))} and {_bound(LATEST_INSTANT)}, the end of the "
                "range of time the service supports."
            )
        return tick


@dataclass(frozen=True, kw_only=True)
class JobRequest:
    """A validated ``POST /jobs`` body (input not yet checked against the payload spec)."""

    endpoint: str
    trigger: TriggerType
    idempotency_key: str | None
    #: Any JSON value (an object, an array, a string, a number...); {} when none was given.
    input: Any
    run_at: datetime | None = None
    schedule: CronSchedule | None = None
    #: A CRON job's first run (:meth:`CronSchedule.first_run`), computed when the request is
    #: parsed: before any transaction opens.
    first_run_at: datetime | None = None
    #: Callback endpoints named in the request (None: the endpoint's default, if any).
    on_success: str | None = None
    on_failure: str | None = None
    #: The job's own headers, sent with each delivery (:mod:`.job_headers`).
    headers: dict[str, str] | None = None
    #: The W3C trace context the job keeps (:mod:`.trace_context`).
    trace: TraceContext | None = None
    #: The job's own delivery settings over its endpoint's (one-shot jobs only:
    #: :mod:`chalicelib.domain.job_delivery`); None for none.
    delivery_overrides: dict[str, Any] | None = None
    #: Executions of the endpoint sharing this key start one at a time, in order; None: none.
    ordering_key: str | None = None
    #: At most the endpoint's ``flow_control.max_concurrency_per_key`` executions sharing
    #: this key run at once (only where the endpoint sets it); None: none.
    concurrency_key: str | None = None


def parse_instant(value: object, name: str) -> datetime:
    """An ISO 8601 timestamp with an explicit offset (``Z`` or ``+05:30``) inside the range
    the service carries (:mod:`chalicelib.domain.timefmt`), else 400 naming the field."""
    if not isinstance(value, str) or len(value) > _MAX_INSTANT_TEXT:
        raise ValidationFailed(f"Field '{name}' must be an ISO 8601 timestamp string.")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError as exc:
        raise ValidationFailed(f"Field '{name}' is not an ISO 8601 timestamp: {value!r}.") from exc
    if moment.tzinfo is None:
        raise ValidationFailed(
            f"Field '{name}' must include a UTC offset (e.g. 'Z' or '+05:30'): {value!r}."
        )
    check_instant(moment, name)
    return moment


#: Longer than any ISO 8601 timestamp ``fromisoformat`` reads (the value is echoed in errors).
_MAX_INSTANT_TEXT = 64


def check_instant(moment: datetime, name: str) -> None:
    """400 naming ``name`` unless the aware ``moment`` lies in the accepted range.

    The comparison is on the instant, so an offset that moves a local date across a bound
    (``9999-12-31T23:59:59-14:00`` is 10000-01-01 in UTC) is caught; comparing aware
    datetimes never builds the shifted value, so it cannot overflow.
    """
    if not in_range(moment):
        raise ValidationFailed(
            f"Field '{name}' must lie between {_bound(EARLIEST_INSTANT)} (inclusive) and "
            f"{_bound(LATEST_INSTANT)} (exclusive), in UTC."
        )


def _bound(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _reject_unknown(body: Mapping[str, Any], allowed: frozenset[str], context: str) -> None:
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise ValidationFailed(f"Unknown field(s) for {context}: {', '.join(unknown)}.")


def _string(body: Mapping[str, Any], name: str, *, required: bool) -> str | None:
    value = body.get(name)
    if value is None:
        if required:
            raise ValidationFailed(f"Missing required field: {name}.")
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValidationFailed(f"Field '{name}' must be a non-empty string.")
    return value


def parse_ordering_key(body: Mapping[str, Any], name: str = "ordering_key") -> str | None:
    """``ordering_key`` (or ``concurrency_key``, as ``name`` says): a string of 1 to
    :data:`MAX_ORDERING_KEY_LENGTH` characters, or absent (null is absent)."""
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_ORDERING_KEY_LENGTH:
        raise ValidationFailed(
            f"Field '{name}' must be a string of 1 to {MAX_ORDERING_KEY_LENGTH} characters."
        )
    return value


def parse_keys(body: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(``ordering_key``, ``concurrency_key``): at most one of them (an ordering key already
    runs its executions one at a time), else 400 naming both."""
    ordering, concurrency = parse_ordering_key(body), parse_ordering_key(body, "concurrency_key")
    if ordering is not None and concurrency is not None:
        raise ValidationFailed(
            "Fields 'ordering_key' and 'concurrency_key' cannot both be set on one job: an "
            "ordering key already runs its executions one at a time."
        )
    return ordering, concurrency


def _input(body: Mapping[str, Any]) -> Any:
    """The job's input: any JSON value (an object, an array, a string, a number, a
    boolean); absent or null is no input, ``{}``."""
    value = body.get("input")
    return {} if value is None else value


def _trigger(body: Mapping[str, Any]) -> TriggerType:
    raw = _string(body, "trigger", required=True)
    try:
        return TriggerType(str(raw))
    except ValueError as exc:
        allowed = ", ".join(t.value for t in TriggerType)
        raise ValidationFailed(f"Field 'trigger' must be one of {allowed}, got {raw!r}.") from exc


# -- system idempotency keys -------------------------------------------------------------
#
# The service creates jobs of its own (callbacks, a batch's on_complete, the jobs of a
# topic's fan-out, the event of an endpoint that paused itself) under idempotency keys that
# make each one exist once; a client key with the same text on the same endpoint would make
# the real one "already exist", so it would never be created. Those prefixes are the
# system's: a client key starting with one is refused with 400. A cron tick's key
# (``cron_<job_id>_<epoch_ms>``) lives on the job's own executions, which no client writes,
# so it needs no reservation.

CALLBACK_KEY_PREFIX = "callback:"
BATCH_COMPLETION_KEY_PREFIX = "batch:"
#: A fan-out's jobs hold ``topic:<topic>:<key>`` (:func:`chalicelib.domain.topics.topic_key`).
TOPIC_KEY_PREFIX = "topic:"
PAUSE_EVENT_KEY_PREFIX = "endpoint.paused:"
RESERVED_KEY_PREFIXES = (
    CALLBACK_KEY_PREFIX,
    BATCH_COMPLETION_KEY_PREFIX,
    TOPIC_KEY_PREFIX,
    PAUSE_EVENT_KEY_PREFIX,
)


def callback_key(execution_id: str, attempt_count: int) -> str:
    """The key of the callback fired when an execution ends after ``attempt_count`` attempts
    (a retried execution that ends again fires again, under a new key)."""
    return f"{CALLBACK_KEY_PREFIX}{execution_id}:{attempt_count}"


def batch_completion_key(batch_id: str) -> str:
    """The key of a batch's ``on_complete`` job: one per batch."""
    return f"{BATCH_COMPLETION_KEY_PREFIX}{batch_id}"


def pause_event_key(endpoint: str, paused_at: datetime) -> str:
    """The key of the operator event of an endpoint's automatic pause: one per pause (a
    pause is identified by its endpoint and the instant it began)."""
    return f"{PAUSE_EVENT_KEY_PREFIX}{endpoint}:{paused_at.timestamp():.6f}"


def _idempotency_key(body: Mapping[str, Any], trigger: TriggerType) -> str | None:
    key = _string(body, "idempotency_key", required=trigger is not TriggerType.CRON)
    if key is None:
        return None
    if len(key) > MAX_IDEMPOTENCY_KEY_LENGTH:
        raise ValidationFailed(
            f"Field 'idempotency_key' is longer than {MAX_IDEMPOTENCY_KEY_LENGTH} characters."
        )
    if key.startswith(RESERVED_KEY_PREFIXES):
        reserved = ", ".join(repr(p) for p in RESERVED_KEY_PREFIXES)
        raise ValidationFailed(
            f"Field 'idempotency_key' must not start with {reserved}: those keys are the "
            "service's own (callbacks, batch completions, topic fan-outs and pause events)."
        )
    return key


def parse_schedule(
    *, expression: object, timezone: object, starts_at: datetime, ends_at: datetime | None
) -> CronSchedule:
    """Validate a schedule: 422 INVALID_CRON, 400 for the zone and the window."""
    if expression is None:
        raise ValidationFailed("Missing required field: cron.")
    if timezone is None:
        raise ValidationFailed("Missing required field: timezone.")
    normalized = cron.validate_cron(expression)
    zone = cron.parse_timezone(timezone)
    if ends_at is not None and ends_at <= starts_at:
        raise ValidationFailed("Field 'ends_at' must be later than 'starts_at'.")
    return CronSchedule(
        expression=normalized, timezone=zone.key, starts_at=starts_at, ends_at=ends_at
    )


def parse_run_at(body: Mapping[str, Any], *, now: datetime) -> datetime:
    """When a DELAYED job runs: its ``run_at``, or ``now`` plus its ``delay``; exactly one
    of the two (400 naming them otherwise). The instant must lie in the accepted range."""
    run_at, delay = body.get("run_at"), body.get("delay")
    if run_at is not None and delay is not None:
        raise ValidationFailed("Fields 'run_at' and 'delay' exclude each other: give one.")
    if delay is not None:
        duration = parse_duration(delay, "delay")
        if duration >= LATEST_INSTANT - now:  # compared before adding: no overflow
            raise ValidationFailed(
                f"Field 'delay' puts run_at past {_bound(LATEST_INSTANT)}, the end of the "
                "range of time the service accepts."
            )
        return now + duration
    if run_at is None:
        raise ValidationFailed("Missing required field: run_at (or delay).")
    return parse_instant(run_at, "run_at")


def _optional_instant(body: Mapping[str, Any], name: str) -> datetime | None:
    value = body.get(name)
    return None if value is None else parse_instant(value, name)


def parse_job_request(
    body: Mapping[str, Any], *, now: datetime, trace: TraceContext | None = None
) -> JobRequest:
    """Validate a ``POST /jobs`` body for its trigger (400 / 422 INVALID_CRON).

    ``trace``: the trace context of the request that carries the body (its
    ``traceparent`` header); a ``traceparent`` in the job's own ``headers`` wins over it.
    """
    trigger = _trigger(body)
    _reject_unknown(body, TRIGGER_FIELDS[trigger], f"{trigger} jobs")
    endpoint = _string(body, "endpoint", required=True)
    assert endpoint is not None
    headers = parse_job_headers(body.get("headers"))
    ordering_key, concurrency_key = parse_keys(body)
    request = JobRequest(
        endpoint=endpoint,
        trigger=trigger,
        idempotency_key=_idempotency_key(body, trigger),
        input=_input(body),
        on_success=_string(body, "on_success", required=False),
        on_failure=_string(body, "on_failure", required=False),
        headers=headers.headers,
        trace=headers.trace or trace,
        delivery_overrides=parse_delivery_overrides(body),
        ordering_key=ordering_key,
        concurrency_key=concurrency_key,
    )
    if trigger is TriggerType.DELAYED:
        return replace(request, run_at=parse_run_at(body, now=now))
    if trigger is TriggerType.CRON:
        schedule = parse_schedule(
            expression=body.get("cron"),
            timezone=body.get("timezone"),
            starts_at=_optional_instant(body, "starts_at") or now,
            ends_at=_optional_instant(body, "ends_at"),
        )
        return replace(request, schedule=schedule, first_run_at=schedule.first_run(now))
    return request


@dataclass(frozen=True, kw_only=True)
class CronUpdate:
    """A validated ``PUT /jobs/{id}``: the new version's schedule and input."""

    schedule: CronSchedule
    input: Any


def parse_cron_update(
    body: Mapping[str, Any], *, current: CronSchedule, current_input: Any
) -> CronUpdate:
    """Merge a PUT body over the current version: unspecified fields are carried over.

    ``ends_at: null`` given explicitly clears the end (the schedule becomes indefinite).
    """
    _reject_unknown(body, CRON_UPDATE_FIELDS, "PUT /jobs/{job_id}")
    if not body:
        raise ValidationFailed(
            f"Nothing to update: give at least one of {', '.join(sorted(CRON_UPDATE_FIELDS))}."
        )
    starts_at = _optional_instant(body, "starts_at") or current.starts_at
    ends_at = _optional_instant(body, "ends_at") if "ends_at" in body else current.ends_at
    schedule = parse_schedule(
        expression=body.get("cron", current.expression),
        timezone=body.get("timezone", current.timezone),
        starts_at=starts_at,
        ends_at=ends_at,
    )
    new_input = _input(body) if "input" in body else current_input
    return CronUpdate(schedule=schedule, input=new_input)


def parse_reschedule(body: Mapping[str, Any], *, now: datetime) -> datetime:
    """A ``PUT /jobs/{job_id}`` of a DELAYED job: its new ``run_at`` (:func:`parse_run_at`:
    ``run_at``, or ``now`` plus ``delay``); nothing else may change (400)."""
    _reject_unknown(body, RESCHEDULE_FIELDS, "PUT /jobs/{job_id} of a DELAYED job")
    return parse_run_at(body, now=now)


# -- list filters -------------------------------------------------------------------------


def _enum_filter(params: Mapping[str, str], name: str, allowed: list[str]) -> str | None:
    value = params.get(name)
    if value is None:
        return None
    if value not in allowed:
        raise ValidationFailed(f"{name} must be one of {', '.join(allowed)}, got {value!r}.")
    return value


def parse_job_filters(params: Mapping[str, str] | None) -> dict[str, str | None]:
    """``GET /jobs`` filters (``endpoint``, ``trigger``, ``status``, ``idempotency_key``);
    400 on a bad value. A key is unique per endpoint, so ``idempotency_key`` needs
    ``endpoint``."""
    params = params or {}
    endpoint = params.get("endpoint")
    if endpoint is not None and not endpoint.strip():
        raise ValidationFailed("endpoint must be a non-empty endpoint name.")
    filters = {
        "endpoint": endpoint,
        "trigger_type": _enum_filter(params, "trigger", [t.value for t in TriggerType]),
        "status": _enum_filter(params, "status", [s.value for s in JobStatus]),
    }
    key = params.get("idempotency_key")
    if key is not None:
        if not key.strip() or len(key) > MAX_IDEMPOTENCY_KEY_LENGTH:
            raise ValidationFailed(
                "idempotency_key must be a non-empty key of at most "
                f"{MAX_IDEMPOTENCY_KEY_LENGTH} characters."
            )
        if endpoint is None:
            raise ValidationFailed(
                "idempotency_key needs endpoint: a key names a job on one endpoint."
            )
        filters["idempotency_key"] = key
    return filters
