"""Heartbeat writer (stub for multi-region): a sign of life every 5 seconds.

Each running component upserts its row of ``region_heartbeats`` (region ``'default'``
today) with the time, a status (``ALIVE``; ``DEAD`` on graceful shutdown) and a little
metadata. Nothing reads the rows yet: the health evaluator that will turn missing beats
into a region failover is inactive (``chalicelib.health.evaluator``).
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
from chalicelib.domain.regions import DEFAULT_REGION
from chalicelib.runtime.loop import LoopSpec, Progress

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
    ) -> None:
        self._db = db
        self.component = component
        self.region = region
        self._clock = clock
        self._metadata = dict(metadata or {})

    def beat(self, status: str = ALIVE) -> None:
        """Write one heartbeat now."""
        self._db.execute(
            queries["health_heartbeat_upsert"],
            region=self.region,
            component=self.component,
            now=self._clock(),
            status=status,
            metadata=json.dumps(self._metadata),
        )

    def iteration(self) -> Progress:
        self.beat()
        return Progress()

    def loop_spec(self, interval_sec: float = HEARTBEAT_INTERVAL_SEC) -> LoopSpec:
        return LoopSpec(name="heartbeat", interval_sec=interval_sec, iteration=self.iteration)
