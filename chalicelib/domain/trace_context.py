"""W3C trace context (https://www.w3.org/TR/trace-context/): ``traceparent`` and
``tracestate`` as a job keeps them and as each delivery attempt sends them.

A job keeps the context it was created in: the ``traceparent`` (and ``tracestate``) header
of ``POST /jobs`` or ``POST /jobs/batch``, or the same names in the job's ``"headers"``.
A malformed ``traceparent`` is ignored, as the recommendation says (the job then has no
trace context: nothing is refused for it), and a ``tracestate`` without a valid
``traceparent`` goes with it. Every attempt then sends the kept trace-id and flags with a
parent-id of its own (:func:`attempt_traceparent`), and the ``tracestate`` unchanged.

A ``traceparent`` of a later version is read by its first four fields, as the
recommendation asks, and kept as version ``00`` (the version this service speaks).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"

# version-traceid-parentid-flags, lower-case hex; a later version may carry more after a
# "-" (version ff is invalid).
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
_ZERO_TRACE = "0" * 32
_ZERO_PARENT = "0" * 16
#: The recommendation's bounds on tracestate: 32 list members; 512 characters is what a
#: vendor may always keep.
MAX_TRACESTATE_MEMBERS = 32
MAX_TRACESTATE_CHARS = 512


@dataclass(frozen=True, slots=True)
class TraceContext:
    """A valid, canonical ``traceparent`` (version 00) and its ``tracestate`` (or None)."""

    traceparent: str
    tracestate: str | None = None

    @property
    def trace_id(self) -> str:
        return self.traceparent[3:35]

    @property
    def parent_id(self) -> str:
        return self.traceparent[36:52]

    @property
    def flags(self) -> str:
        return self.traceparent[53:55]


def parse_traceparent(value: object) -> str | None:
    """``value`` as a canonical version-00 ``traceparent``, or None when it is malformed."""
    if not isinstance(value, str) or len(value) > 512:
        return None
    found = _TRACEPARENT.fullmatch(value.strip(" \t"))
    if found is None:
        return None
    version, trace_id, parent_id, flags, rest = found.groups()
    if version == "ff" or (version == "00" and rest is not None):
        return None
    if trace_id == _ZERO_TRACE or parent_id == _ZERO_PARENT:
        return None
    return f"00-{trace_id}-{parent_id}-{flags}"


def parse_tracestate(value: object) -> str | None:
    """``value`` as a ``tracestate`` to pass on unchanged, or None when it is absent, empty
    or past the recommendation's bounds (then dropped, as a vendor may)."""
    if not isinstance(value, str):
        return None
    text = value.strip(" \t")
    if not text or len(text) > MAX_TRACESTATE_CHARS:
        return None
    if any(c in text for c in "\r\n\0") or text.count(",") >= MAX_TRACESTATE_MEMBERS:
        return None
    return text


def trace_context(traceparent: object, tracestate: object = None) -> TraceContext | None:
    """The context of a ``traceparent`` and ``tracestate`` pair; None if the traceparent is
    missing or malformed (its tracestate is then ignored too)."""
    parent = parse_traceparent(traceparent)
    if parent is None:
        return None
    return TraceContext(parent, parse_tracestate(tracestate))


def new_parent_id(rand: random.Random | None = None) -> str:
    """A random, non-zero parent-id (16 lower-case hex digits)."""
    bits = (rand or _RANDOM).getrandbits(64) or 1
    return f"{bits:016x}"


def attempt_traceparent(traceparent: str, parent_id: str) -> str:
    """The kept ``traceparent`` with ``parent_id`` in place of its own: same trace-id and
    flags (the kept value is canonical, so the fields are at fixed places)."""
    return f"{traceparent[:36]}{parent_id}{traceparent[52:]}"


_RANDOM = random.Random()
