"""Endpoints that pause themselves: why an endpoint is paused, when a target says it is gone,
and when an endpoint has failed long enough. Pure: no database, no clock of its own.

* ``paused_reason`` (:class:`PausedReason`): ``GONE`` (an HTTP delivery was answered
  ``410 Gone``), ``FAILING`` (every attempt failed for longer than the endpoint's
  ``auto_pause_after_ms``) or ``OPERATOR`` (``POST /endpoints/{name}/pause``); null while
  the endpoint is not paused. A pause keeps the reason it began with.
* ``auto_pause_after_ms``: an endpoint field, :data:`DEFAULT_AUTO_PAUSE_AFTER_MS` (five
  days) when omitted, between :data:`MIN_AUTO_PAUSE_AFTER_MS` and
  :data:`MAX_AUTO_PAUSE_AFTER_MS`; ``null`` turns the FAILING rule off (a 410 still pauses).
* The FAILING rule (:func:`judge`) is evaluated by the housekeeper from the attempts
  counted per endpoint (``delivery_counts``' rolled-up totals, a few minutes behind the
  deliveries), pass after pass: a stretch of failures
  begins at the first pass that sees new failed attempts and no new success, ends at a pass
  that sees a new success (or finds the endpoint paused), and pauses the endpoint at a pass
  that sees new failures once the stretch is older than the window. A stretch therefore
  starts late by a pass and the roll-up, never early, and an endpoint that simply stops being
  tried is not paused for being quiet.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from chalicelib.errors import ValidationFailed

FIELD = "auto_pause_after_ms"
#: Five days: what Svix waits before it disables an endpoint that fails every attempt. Long
#: enough to outlast a weekend's outage and every retry backoff the API accepts (at most a
#: day per retry), short enough that a target that is gone for good stops being tried
#: within a working week.
DEFAULT_AUTO_PAUSE_AFTER_MS = 5 * 86_400_000
#: A minute: shorter than the housekeeper's pass, the rule could not tell a stretch of
#: failures from one failed attempt.
MIN_AUTO_PAUSE_AFTER_MS = 60_000
#: Thirty days, the longest ``retry_policy.max_retry_duration_ms``.
MAX_AUTO_PAUSE_AFTER_MS = 30 * 86_400_000
#: The HTTP status that retires an endpoint at once (Standard Webhooks: 410 disables it).
GONE_STATUS = 410
#: The ``type`` of the event sent to ``TE_OPERATOR_ENDPOINT`` for each automatic pause.
EVENT_TYPE = "endpoint.paused"


class PausedReason(StrEnum):
    """Why an endpoint is paused (``paused_reason``)."""

    GONE = "GONE"  #: an HTTP delivery was answered 410 Gone
    FAILING = "FAILING"  #: every attempt failed for longer than auto_pause_after_ms
    OPERATOR = "OPERATOR"  #: paused by hand (POST /endpoints/{name}/pause)


#: The reasons a pause is automatic (counted in te_endpoint_auto_paused_total).
AUTOMATIC = (PausedReason.FAILING, PausedReason.GONE)


def parse_auto_pause_after_ms(body: Any) -> int | None:
    """The field from an endpoint body: the default when omitted, None when null (off),
    else an integer within the bounds (400 naming the field otherwise)."""
    if FIELD not in body:
        return DEFAULT_AUTO_PAUSE_AFTER_MS
    value = body[FIELD]
    if value is None:
        return None
    lowest, highest = MIN_AUTO_PAUSE_AFTER_MS, MAX_AUTO_PAUSE_AFTER_MS
    if not isinstance(value, int) or isinstance(value, bool) or not lowest <= value <= highest:
        raise ValidationFailed(
            f"Field '{FIELD}' must be an integer between {lowest} and {highest} "
            "(milliseconds), or null to never pause the endpoint for failing."
        )
    return value


def is_gone(endpoint_type: str, error: Any) -> bool:
    """Whether a failed attempt's error is an HTTP endpoint's target answering 410 (only
    HTTP has such an answer; a 410 the endpoint lists as expected is a success)."""
    return (
        endpoint_type == "HTTP"
        and isinstance(error, dict)
        and error.get("status_code") == GONE_STATUS
    )


def event(endpoint: str, reason: PausedReason, at: str) -> dict[str, str]:
    """The input of the job sent to ``TE_OPERATOR_ENDPOINT`` for an automatic pause."""
    return {"type": EVENT_TYPE, "endpoint": endpoint, "reason": str(reason), "at": at}


@dataclass(frozen=True, kw_only=True)
class Watch:
    """What the FAILING rule remembers of an endpoint between passes: the attempts counted
    by outcome at the last pass, and since when every new attempt has failed."""

    succeeded: int
    failed: int
    failing_since: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """A pass's judgement: what to remember, and whether to pause the endpoint now."""

    watch: Watch
    pause: bool = False


def judge(
    seen: Watch | None,
    *,
    succeeded: int,
    failed: int,
    paused: bool,
    window_ms: int | None,
    now: datetime,
) -> Verdict:
    """One pass of the FAILING rule over an endpoint's attempt counts (``succeeded``,
    ``failed``: every attempt counted so far) against what the last pass saw (``seen``;
    None the first time)."""
    fresh = Watch(succeeded=succeeded, failed=failed)
    if seen is None or paused or window_ms is None:
        return Verdict(watch=fresh)  # first sight, or a pause ends any stretch
    if succeeded != seen.succeeded or failed < seen.failed:
        return Verdict(watch=fresh)  # a success (or counts restarted): healthy
    if failed == seen.failed:
        return Verdict(watch=seen)  # not tried since: the stretch neither grows nor ends
    since = seen.failing_since
    if since is None:
        return Verdict(watch=replace(fresh, failing_since=now))
    if now - since >= timedelta(milliseconds=window_ms):
        return Verdict(watch=fresh, pause=True)
    return Verdict(watch=replace(fresh, failing_since=since))
