"""Heartbeat writer: a sign of life every 5 seconds, with the states of the process's loops.

Each running component upserts its row of ``region_heartbeats`` (region ``'default'``
today) with the time, a status (``ALIVE``; ``DEAD`` on graceful shutdown) and a little
metadata. Given the process's :class:`~chalicelib.runtime.registry.LoopRegistry`, every
beat also writes each loop's state under ``metadata.loop_states``
(:mod:`chalicelib.domain.loops`): ``GET /health`` answers 503 ``LOOP_DOWN`` while a recent
beat reports a loop down, and ``GET /metrics`` shows ``te_loop_up`` per process and loop.
The health evaluator that will turn missing beats into a region failover is inactive
(``chalicelib.health.evaluator``).
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from chalicelib.db.connection import Database
from chalicelib.db.queries import queries
from chalicelib.domain.clock import utcnow
from chalicelib.domain.loops import METADATA_KEY, states_to_json
from chalicelib.domain.regions import DEFAULT_REGION
from chalicelib.runtime.loop import LoopSpec, Progress
from chalicelib.runtime.registry import LoopRegistry

HEARTBEAT_INTERVAL_SEC = 5.0

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
        component: str,
        region: str = DEFAULT_REGION,
        clock: Callable[[], datetime] = utcnow,
        metadata: Mapping[str, Any] | None = None,
        registry: LoopRegistry | None = None,
    ) -> None:
        self._db = db
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

    def beat(self, status: str = ALIVE) -> None:
        """Write one heartbeat now."""
        self._db.execute(
            queries["health_heartbeat_upsert"],
            region=self.region,
            component=self.component,
            now=self._clock(),
            status=status,
            metadata=json.dumps(self.metadata()),
        )

    def iteration(self) -> Progress:
        self.beat()
        return Progress()

    def loop_spec(self, interval_sec: float = HEARTBEAT_INTERVAL_SEC) -> LoopSpec:
        return LoopSpec(name="heartbeat", interval_sec=interval_sec, iteration=self.iteration)
