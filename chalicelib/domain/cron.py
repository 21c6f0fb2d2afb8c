"""Cron schedules in IANA timezones: validation and the next tick.

Semantics (documented in the README):

* Expressions have exactly 5 fields (minute hour day-of-month month day-of-week) and at
  most :data:`MAX_CRON_LENGTH` characters.
* Ticks are computed in the job's local wall-clock time and stored in UTC.
* DST spring-forward: a local time that does not exist that day is skipped.
* DST fall-back: a local time that occurs twice fires once, at its first occurrence.
* The next tick is computed from the current tick, not from now, so a scheduler that was
  down materializes every missed tick one by one.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta
from importlib import resources
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from chalicelib.domain.timefmt import LATEST_INSTANT
from chalicelib.errors import InvalidCron, ValidationFailed

#: Longest expression accepted, in characters (a few lists and ranges fit; every field
#: spelled out value by value is 319). croniter parses an expression again at every tick
#: it computes, in time that grows with its list items: 1 MiB expressions
#: (``0,*/1,*/1,...``) took 3.1 s per tick, inside the creating transaction and in every
#: pass of the scheduler. At this length a tick costs about a millisecond at most.
MAX_CRON_LENGTH = 256

# Enough candidates to walk past any DST gap/overlap; a valid expression always has a
# match within a few years (croniter itself rejects impossible dates like Feb 30).
_MAX_CANDIDATES = 10_000


#: Names in the tz database that describe a host rather than a place: a schedule must not
#: depend on how the server that happens to run it is configured.
HOST_DEPENDENT_ZONES = frozenset({"Factory", "localtime", "posixrules"})


@functools.cache
def iana_zone_names() -> frozenset[str]:
    """Every zone name the pinned ``tzdata`` package lists, less host-dependent ones.

    The set comes from the package, not the host's ``/usr/share/zoneinfo``, so the same
    names are accepted on every machine (the host may add ``localtime``, ``posix/...``).
    """
    listed = resources.files("tzdata").joinpath("zones").read_text(encoding="utf-8")
    return frozenset(listed.split()) - HOST_DEPENDENT_ZONES


def parse_timezone(name: object) -> ZoneInfo:
    """The ZoneInfo for an IANA name, or a 400 INVALID_REQUEST naming the problem."""
    if not isinstance(name, str) or not name:
        raise ValidationFailed(f"timezone must be an IANA timezone name, got {name!r}.")
    if name not in iana_zone_names():
        shown = name if len(name) <= 64 else f"{name[:64]}... ({len(name)} characters)"
        raise ValidationFailed(
            f"Unknown IANA timezone {shown!r} (names such as 'Europe/Paris' or 'UTC')."
        )
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ValidationFailed(f"Unknown IANA timezone {name!r}.") from exc


def stored_zone(name: str) -> ZoneInfo:
    """The zone of a job already stored: loaded as it was accepted, not re-validated.

    Jobs created before host-dependent names were refused keep running on this host; a
    name this host cannot load at all is a ValidationFailed, reported by the caller.
    """
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ValidationFailed(f"Unknown IANA timezone {name[:64]!r}.") from exc


def validate_cron(expression: object) -> str:
    """Return the normalized expression or raise 422 INVALID_CRON."""
    from croniter import croniter  # imported on use: not needed by most cold starts

    if not isinstance(expression, str):
        raise InvalidCron("cron must be a string with 5 fields.")
    require_bounded(expression)
    fields = expression.split()
    if len(fields) != 5:
        raise InvalidCron(
            f"cron must have exactly 5 fields (minute hour day month weekday), got {len(fields)}."
        )
    normalized = " ".join(fields)
    if not croniter.is_valid(normalized):
        raise InvalidCron(f"Invalid cron expression {expression!r}.")
    try:
        next_tick(normalized, ZoneInfo("UTC"), datetime(2000, 1, 1, tzinfo=UTC))
    except (ValueError, KeyError) as exc:
        raise InvalidCron(f"Cron expression {expression!r} never fires.") from exc
    return normalized


def require_bounded(expression: str) -> None:
    """422 INVALID_CRON if ``expression`` is longer than :data:`MAX_CRON_LENGTH`.

    Checked wherever a tick is computed, so that an expression stored before the limit
    (the scheduler sets its job aside, with this message) costs no more than one allowed.
    """
    if len(expression) > MAX_CRON_LENGTH:
        raise InvalidCron(
            f"cron expression is {len(expression)} characters long; at most "
            f"{MAX_CRON_LENGTH} are accepted (write lists as ranges and steps, e.g. '0-30/5')."
        )


def _exists(local: datetime, zone: ZoneInfo) -> bool:
    """False for wall-clock times inside a spring-forward gap."""
    aware = local.replace(tzinfo=zone, fold=0)
    back = aware.astimezone(UTC).astimezone(zone).replace(tzinfo=None)
    return back == local


def next_tick(expression: str, zone: ZoneInfo, after: datetime) -> datetime:
    """The first tick strictly after ``after`` (UTC-aware), as a UTC datetime."""
    from croniter import CroniterBadDateError, croniter

    if after.tzinfo is None:
        raise ValueError("after must be timezone-aware")
    require_bounded(expression)
    wall = after.astimezone(zone).replace(tzinfo=None, fold=0)
    # Start one minute early so a tick at exactly the wall time of `after` is reconsidered;
    # the UTC comparison below then keeps only ticks strictly after `after`.
    iterator = croniter(expression, wall - timedelta(minutes=1))
    try:
        for _ in range(_MAX_CANDIDATES):
            candidate: datetime = iterator.get_next(datetime)
            if not _exists(candidate, zone):
                continue
            tick = candidate.replace(tzinfo=zone, fold=0).astimezone(UTC)
            if tick > after:
                return tick
    except CroniterBadDateError as exc:
        raise ValueError(f"cron expression {expression!r} has no next tick") from exc
    raise ValueError(f"cron expression {expression!r} has no tick in range")


def first_tick(expression: str, zone: ZoneInfo, starts_at: datetime) -> datetime:
    """The first tick at or after ``starts_at``."""
    return next_tick(expression, zone, starts_at - timedelta(microseconds=1))


def first_tick_in_range(expression: str, zone: ZoneInfo, starts_at: datetime) -> datetime | None:
    """The first tick at or after ``starts_at`` that lies before
    :data:`~chalicelib.domain.timefmt.LATEST_INSTANT`, or None when none does.

    Past the supported range a tick cannot be stored (the columns' CHECK refuses it), and
    in year 10000 it cannot even be computed (``0 0 29 2 *`` from 9998).
    """
    try:
        tick = first_tick(expression, zone, starts_at)
    except (ValueError, OverflowError):
        return None
    return tick if tick < LATEST_INSTANT else None


def render_local(moment: datetime | None, zone: ZoneInfo) -> str | None:
    """ISO 8601 in the job's timezone with its offset, e.g. ``2026-03-16T09:00:00+05:30``."""
    if moment is None:
        return None
    return moment.astimezone(zone).isoformat()
