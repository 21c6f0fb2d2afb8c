"""Heartbeat writer: a sign of life every 5 seconds, with the states of the process's loops.

Each running component upserts its row of ``region_heartbeats`` (region ``'default'``
today) with the time, a status (``ALIVE``; ``DEAD`` on graceful shutdown), its kind
(:data:`KINDS`), until when it counts as live (``fresh_until``: the time its next beat is
due plus :data:`GRACE_SEC`) and a little metadata. A long-lived process's next beat is one
interval away; a scheduled Lambda invocation's last beat says the next invocation comes
within its schedule's period, so a lean deployment whose scheduler runs a few seconds a
minute is live between its invocations, and is not a minute after its last one.
``te_live_processes{kind}`` in ``GET /metrics`` counts the fresh rows of each kind, and
``GET /health`` answers 503 ``PROCESS_DOWN`` for a kind that has run with none fresh.

Given the process's :class:`~chalicelib.runtime.registry.LoopRegistry`, every beat also
writes each loop's state under ``metadata.loop_states``
(:mod:`chalicelib.domain.loops`): ``GET /health`` answers 503 ``LOOP_DOWN`` while a recent
beat reports a loop down, and ``GET /metrics`` shows ``te_loop_up`` per process and loop.
No failover reads these beats yet (multi-region is a stub: :mod:`chalicelib.health.region`).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from chalicelib.db.connection import Database
from chalicelib.db.queries import queries
from chalicelib.domain.clock import utcnow
from chalicelib.domain.loops import (
    API,
    KINDS,
    METADATA_KEY,
    SCHEDULER,
    WORKER,
    KindLiveness,
    kinds_from_json,
    states_to_json,
)
from chalicelib.domain.regions import DEFAULT_REGION
from chalicelib.logs import FailureLog
from chalicelib.runtime.loop import LoopSpec, Progress
from chalicelib.runtime.registry import LoopRegistry

__all__ = [
    "API",
    "KINDS",
    "SCHEDULER",
    "WORKER",
    "BeatWhenServing",
    "HeartbeatWriter",
    "KindLiveness",
    "live_processes",
]

log = logging.getLogger(__name__)

HEARTBEAT_INTERVAL_SEC = 5.0
#: Past the time its next beat is due, a row still counts as live this long (two missed
#: beats of a long-lived process, or a late scheduled invocation).
GRACE_SEC = 10.0


ALIVE = "ALIVE"
DEAD = "DEAD"


def instance_name(role: str) -> str:
    """A component name unique to this process: ``<role>@<host>:<pid>``."""
    return f"{role}@{socket.gethostname()}:{os.getpid()}"


class HeartbeatWriter:
    """Upserts ``(region, component)`` in ``region_heartbeats``."""

    def __init__(
        self,
        db: Database,
        *,
        kind: str,
        component: str,
        region: str = DEFAULT_REGION,
        clock: Callable[[], datetime] = utcnow,
        metadata: Mapping[str, Any] | None = None,
        registry: LoopRegistry | None = None,
        interval_sec: float = HEARTBEAT_INTERVAL_SEC,
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"heartbeat kind {kind!r}: expected one of {KINDS}")
        self._db = db
        self.kind = kind
        self.interval_sec = interval_sec
        self.component = component
        self.region = region
        self._clock = clock
        self._metadata = dict(metadata or {})
        self._registry = registry

    def metadata(self) -> dict[str, Any]:
        """What the next beat writes: the fixed metadata and the loops' states now."""
        if self._registry is None:
            return dict(self._metadata)
        return {**self._metadata, METADATA_KEY: states_to_json(self._registry.snapshot())}

    def beat(self, status: str = ALIVE, *, next_beat_in: float | None = None) -> None:
        """Write one heartbeat now; the next is due in ``next_beat_in`` seconds (default:
        the interval). A ``DEAD`` beat is a graceful stop: live no longer."""
        now = self._clock()
        if status == DEAD:
            fresh_until = now
        else:
            wait = self.interval_sec if next_beat_in is None else next_beat_in
            fresh_until = now + timedelta(seconds=wait + GRACE_SEC)
        self._db.execute(
            queries["health_heartbeat_upsert"],
            region=self.region,
            component=self.component,
            now=now,
            status=status,
            metadata=json.dumps(self.metadata()),
            kind=self.kind,
            fresh_until=fresh_until,
        )

    def iteration(self) -> Progress:
        self.beat()
        return Progress()

    def loop_spec(self) -> LoopSpec:
        return LoopSpec(name="heartbeat", interval_sec=self.interval_sec, iteration=self.iteration)


class BeatWhenServing:
    """The heartbeat of a process that runs only while it serves (the API, a Lambda
    container frozen between requests): :meth:`served` beats at most once an interval, and a
    beat that fails never fails the request that triggered it (it is logged, then counted)."""

    def __init__(self, writer: HeartbeatWriter, *, monotonic: Callable[[], float] = time.monotonic):
        self.writer = writer
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._due = 0.0
        self._failures = FailureLog(log, f"heartbeat of {writer.component}")

    def served(self) -> None:
        """A request is being served: beat now unless one was written within the interval."""
        now = self._monotonic()
        if now < self._due:  # the common case, without the lock (a float read is atomic)
            return
        with self._lock:
            if now < self._due:
                return
            self._due = now + self.writer.interval_sec
        try:
            self.writer.beat()
        except Exception as exc:
            self._failures.failed(exc)
        else:
            self._failures.succeeded()


def live_processes(db: Database, now: datetime) -> list[KindLiveness]:
    """Every kind's live processes and whether it has run (one indexed read)."""
    rows = db.run(queries["health_live_processes"], now=now)
    return kinds_from_json(rows[0]["kinds"] if rows else None)
