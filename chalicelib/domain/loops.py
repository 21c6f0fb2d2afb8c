"""What a background loop's state is, when it counts as down, and how heartbeats carry it.

Every loop of a process (the scheduler's four, the heartbeat and region refresher, the
worker's claim and finalize) has a :class:`LoopState`, kept in the process's registry
(:mod:`chalicelib.runtime.registry`) and written into the process's heartbeat row
(``region_heartbeats.metadata.loop_states``) every beat, so ``GET /health`` and ``GET /metrics``
in any API container can say which loop of which process is down.

A loop is **down** (:attr:`LoopState.down`) when

* its thread died and is waiting to be restarted (``restarting``), or
* its last :data:`DOWN_AFTER_FAILURES` iterations or more failed in a row, and the last
  failure was not transient (a database that is unreachable or contended is reported by
  ``/health`` itself as ``DATABASE_UNAVAILABLE``; counting it here would keep ``/health``
  at 503 for a slow loop's whole back-off after the database came back).

A loop whose iteration failed fewer times, or only on a transient database error, is
``failing`` but not down: ``/metrics`` still shows it up.

Pure: no clock (times are passed in), no database.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

#: The heartbeat metadata key holding the loop states.
METADATA_KEY = "loop_states"

#: Failed iterations in a row (on a non-transient error) before a loop counts as down.
DOWN_AFTER_FAILURES = 3


class LoopPhase(StrEnum):
    RUNNING = "running"  #: its last iteration succeeded (or none has run yet)
    FAILING = "failing"  #: its last iteration raised; it goes on after a back-off
    RESTARTING = "restarting"  #: its thread died; the group restarts it after a back-off
    STOPPED = "stopped"  #: it ended (stop requested, or the invocation's time spent)


@dataclass(frozen=True, kw_only=True)
class LoopState:
    """One loop as its process last saw it."""

    name: str
    phase: LoopPhase = LoopPhase.RUNNING
    #: When the current failing/restarting streak began (None while running).
    since: datetime | None = None
    failures: int = 0  #: failed iterations (or crashes) in the current streak
    error: str | None = None  #: the last error's type name
    transient: bool = False  #: the last error was a database outage or contention

    @property
    def down(self) -> bool:
        if self.phase is LoopPhase.RESTARTING:
            return True
        return (
            self.phase is LoopPhase.FAILING
            and self.failures >= DOWN_AFTER_FAILURES
            and not self.transient
        )

    def failed(self, error: str, *, transient: bool, now: datetime) -> LoopState:
        """The state after one more failed iteration."""
        streak = self.phase in (LoopPhase.FAILING, LoopPhase.RESTARTING)
        return replace(
            self,
            phase=LoopPhase.FAILING,
            since=self.since if streak and self.since is not None else now,
            failures=self.failures + 1 if streak else 1,
            error=error,
            transient=transient,
        )

    def crashed(self, error: str, *, now: datetime) -> LoopState:
        """The state after the loop's thread died (it waits to be restarted)."""
        failing = self.failed(error, transient=False, now=now)
        return replace(failing, phase=LoopPhase.RESTARTING)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"phase": self.phase.value, "down": self.down}
        if self.phase is not LoopPhase.RUNNING and self.phase is not LoopPhase.STOPPED:
            body.update(
                since=None if self.since is None else self.since.isoformat(),
                failures=self.failures,
                error=self.error,
                transient=self.transient,
            )
        return body


def states_to_json(states: Iterable[LoopState]) -> dict[str, dict[str, Any]]:
    """The ``loop_states`` object of a heartbeat's metadata: loop name -> its state."""
    return {state.name: state.to_json() for state in states}


@dataclass(frozen=True, kw_only=True)
class ReportedLoop:
    """A loop as a heartbeat row reports it (what ``/health`` and ``/metrics`` show)."""

    component: str
    loop: str
    down: bool
    phase: str
    since: str | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "component": self.component,
            "loop": self.loop,
            "phase": self.phase,
            "since": self.since,
            "error": self.error,
        }


def reported_loops(component: str, metadata: object) -> list[ReportedLoop]:
    """The loops a heartbeat's ``metadata`` reports, best effort.

    Rows are written by every version of every process (and could be edited by hand): an
    entry that is not the expected shape is skipped, never raised on, so one odd row cannot
    break ``/health``. A process that reports no loops contributes nothing.
    """
    loops = metadata.get(METADATA_KEY) if isinstance(metadata, Mapping) else None
    if not isinstance(loops, Mapping):
        return []
    found = []
    for name, body in loops.items():
        if isinstance(name, str) and isinstance(body, Mapping):
            found.append(
                ReportedLoop(
                    component=component,
                    loop=name,
                    down=body.get("down") is True,
                    phase=str(body.get("phase", "")),
                    since=_text(body.get("since")),
                    error=_text(body.get("error")),
                )
            )
    return found


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


#: The kinds of process that beat (``te_live_processes{kind}``).
API = "api"
WORKER = "worker"
SCHEDULER = "scheduler"
KINDS = (API, SCHEDULER, WORKER)


@dataclass(frozen=True)
class KindLiveness:
    """One kind of process as the heartbeats show it."""

    kind: str
    live: int  #: processes whose heartbeat is fresh
    has_run: bool  #: a row of this kind exists (the housekeeper keeps each kind's newest)

    @property
    def down(self) -> bool:
        """It has run in this deployment and no process of it is live now."""
        return self.has_run and self.live == 0


def kinds_from_json(value: object) -> list[KindLiveness]:
    """The ``[kind, live, has run]`` arrays metrics_live_processes reads, every kind of
    :data:`KINDS` present (one the read did not return counts as never run)."""
    seen: dict[str, KindLiveness] = {}
    for entry in value if isinstance(value, list) else []:
        if isinstance(entry, list) and len(entry) == 3 and entry[0] in KINDS:
            seen[entry[0]] = KindLiveness(entry[0], int(entry[1]), entry[2] is True)
    return [seen.get(kind, KindLiveness(kind, 0, False)) for kind in KINDS]


#: The longest reason recorded for a row a loop set aside.
REASON_LIMIT = 500


def fault_reason(exc: BaseException) -> str:
    """Why a row was set aside, as stored and shown: the error's type and message, bounded
    and without NUL characters (which a TEXT column refuses)."""
    text = f"{type(exc).__name__}: {exc}".replace("\x00", "")
    return text if len(text) <= REASON_LIMIT else text[: REASON_LIMIT - 3] + "..."


#: ``attempts.error.type`` of an execution a loop set aside because it cannot process it.
UNPROCESSABLE = "UNPROCESSABLE"
