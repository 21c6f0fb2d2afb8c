"""The filters of ``GET /endpoints``: paused or not, and a health.

An endpoint's health is the overview's (:mod:`chalicelib.domain.health`: its executions of
the last 24 hours), judged for the endpoints with any; every other endpoint is IDLE. A
health filter is therefore a set of names to keep (HEALTHY, DEGRADED, FAILING) or, for
IDLE, to leave out: :func:`names_for`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chalicelib.domain.health import Health
from chalicelib.errors import ValidationFailed

_FLAGS = {"true": True, "false": False}


@dataclass(frozen=True, kw_only=True)
class EndpointFilter:
    """What ``GET /endpoints`` keeps (each filter optional: None keeps every endpoint)."""

    paused: bool | None = None  #: True: paused ones only; False: those not paused
    health: Health | None = None  #: only endpoints with this health


@dataclass(frozen=True, kw_only=True)
class NameSet:
    """Endpoints kept by name: those in ``names`` (``among``) or those not in them."""

    names: tuple[str, ...]
    among: bool

    def params(self) -> dict[str, Any]:
        return {"names": list(self.names), "among": self.among}


NO_NAMES: dict[str, Any] = {"names": None, "among": None}


def parse_endpoint_filter(params: Mapping[str, str] | None) -> EndpointFilter:
    """The query of ``GET /endpoints``; 400 INVALID_REQUEST on any bad value."""
    params = params or {}
    raw_paused = params.get("paused")
    if raw_paused is not None and raw_paused not in _FLAGS:
        raise ValidationFailed(f"paused must be true or false, got {raw_paused!r}.")
    raw_health = params.get("health")
    try:
        health = None if raw_health is None else Health(raw_health)
    except ValueError as exc:
        allowed = ", ".join(h.value for h in Health)
        raise ValidationFailed(f"health must be one of {allowed}, got {raw_health!r}.") from exc
    return EndpointFilter(paused=None if raw_paused is None else _FLAGS[raw_paused], health=health)


def names_for(health: Health, judged: Mapping[str, Health]) -> NameSet:
    """The names a health filter keeps, from ``judged`` (the endpoints with executions in
    the window, by health): those with ``health``, or for IDLE every one not judged busy."""
    if health is Health.IDLE:
        busy = sorted(name for name, seen in judged.items() if seen is not Health.IDLE)
        return NameSet(names=tuple(busy), among=False)
    return NameSet(
        names=tuple(sorted(n for n, seen in judged.items() if seen is health)), among=True
    )
