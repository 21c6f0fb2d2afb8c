"""A job's own delivery settings: what ``POST /jobs`` (and a batch item) may set over its
endpoint for this job alone, and what the worker makes of them.

* ``retry_policy``: the endpoint's retry policy fields (``max_retry_duration_ms``
  included); each field given overrides the endpoint's for this job.
* ``timeout_ms``: as the endpoint's (1..300000), over its ``spec.timeout_ms``.
* ``url`` (HTTP): delivered there instead of ``spec.url``, with the endpoint's method,
  headers, template and signing; only under the endpoint's ``allowed_url_prefixes``
  (:mod:`chalicelib.domain.url_prefixes`, checked when the job is written and again at
  each delivery).
* ``expire_after``: a duration (``"90s"``, ``"1h30m"``): an execution not started that long
  after its due time ends FAILED (``EXPIRED``) without being delivered.

They are kept as one object on the job (``jobs.delivery_overrides``: only what was given,
``expire_after`` as ``expire_after_ms``), which the claim returns with the endpoint
snapshot. A retry with the endpoint's current definition keeps them over that definition.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from chalicelib.domain.endpoints import MAX_DELAY_MS, MAX_TIMEOUT_MS, check_retry_fields
from chalicelib.domain.timefmt import format_duration, parse_duration
from chalicelib.errors import ValidationFailed

_MILLISECOND = timedelta(milliseconds=1)

#: The body fields of a job that set its own delivery.
DELIVERY_FIELDS = frozenset({"retry_policy", "timeout_ms", "url", "expire_after"})


def parse_delivery_overrides(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the body sets for its job's delivery (None: nothing); 400 naming the field.
    ``url`` is checked here for its type only: its endpoint's prefixes decide (422)."""
    overrides: dict[str, Any] = {}
    for field, stored, parse in _OVERRIDE_FIELDS:
        if body.get(field) is not None and (value := parse(body[field])) is not None:
            overrides[stored] = value
    return overrides or None


def _retry_policy(value: Any) -> dict[str, Any] | None:
    policy = check_retry_fields(value)
    if policy.get("initial_delay_ms", 0) > policy.get("max_delay_ms", MAX_DELAY_MS):
        raise ValidationFailed(
            "Field 'retry_policy.initial_delay_ms' must be less than or equal to max_delay_ms."
        )
    return policy or None


def _timeout_ms(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_TIMEOUT_MS:
        raise ValidationFailed(
            f"Field 'timeout_ms' must be an integer between 1 and {MAX_TIMEOUT_MS}."
        )
    return value


def _url(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValidationFailed("Field 'url' must be a non-empty string.")
    return value


def _expire_after_ms(value: Any) -> int:
    return parse_duration(value, "expire_after") // _MILLISECOND


#: Each body field a job may set, in the order they are checked: where it is kept on the job
#: and what reads it (None: nothing to keep, e.g. an empty retry policy).
_OVERRIDE_FIELDS: tuple[tuple[str, str, Callable[[Any], Any]], ...] = (
    ("retry_policy", "retry_policy", _retry_policy),
    ("timeout_ms", "timeout_ms", _timeout_ms),
    ("url", "url", _url),
    ("expire_after", "expire_after_ms", _expire_after_ms),
)


def shown_overrides(overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """The job's own delivery settings as ``POST /jobs`` takes them (``expire_after`` as a
    duration string again), for its representation; empty for a job that set none."""
    if not overrides:
        return {}
    shown = {k: overrides[k] for k in ("retry_policy", "timeout_ms", "url") if k in overrides}
    if "expire_after_ms" in overrides:
        shown["expire_after"] = format_duration(int(overrides["expire_after_ms"]))
    return shown


def overridden_spec(spec: dict[str, Any], overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """A rendered request ``spec`` with the job's ``url`` and ``timeout_ms`` over its own."""
    if not overrides:
        return spec
    changed = {k: overrides[k] for k in ("url", "timeout_ms") if k in overrides}
    return {**spec, **changed} if changed else spec


def overridden_policy(
    policy: Mapping[str, Any] | None, overrides: Mapping[str, Any] | None
) -> Mapping[str, Any] | None:
    """The endpoint's retry policy object with the job's fields over it."""
    own = (overrides or {}).get("retry_policy")
    return {**(policy or {}), **own} if own else policy


def max_attempts_of(policy: Mapping[str, Any], overrides: Mapping[str, Any] | None) -> int:
    """The attempts an execution of this job is allowed: the job's, else its endpoint's."""
    merged = overridden_policy(policy, overrides) or {}
    return int(merged.get("max_attempts", 1))


def is_expired(overrides: Mapping[str, Any] | None, late_ms: float | None) -> bool:
    """Whether a first attempt starting ``late_ms`` after its due time is too late."""
    expire_after = (overrides or {}).get("expire_after_ms")
    return expire_after is not None and late_ms is not None and late_ms >= int(expire_after)
