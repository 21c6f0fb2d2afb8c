"""Region status refresher (stub for multi-region): reads ``region_status`` every 10 s.

What it reads is kept and logged when it changes, but the answer is fixed for now: the
active regions are always ``["default"]`` and the :class:`RegionFilter` it hands to the
claim and scheduler queries is the no-op one. Activating multi-region means computing both
from the rows (alive regions plus the ones this region adopted).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from chalicelib.db.connection import Database
from chalicelib.db.queries import queries
from chalicelib.domain.regions import ALL_REGIONS, DEFAULT_REGION, RegionFilter
from chalicelib.logs import log_event
from chalicelib.runtime.loop import LoopSpec, Progress

log = logging.getLogger(__name__)

REGION_REFRESH_INTERVAL_SEC = 10.0


class RegionRefresher:
    """Holds the latest ``region_status`` rows; serves the (stub) active regions."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._lock = threading.Lock()
        self._rows: list[dict[str, Any]] = []

    def refresh(self) -> list[str]:
        """Read ``region_status`` and return the active regions (always ``["default"]``)."""
        rows = self._db.run(queries["health_region_status"])
        with self._lock:
            changed = rows != self._rows
            self._rows = rows
        if changed:
            log_event(
                log,
                "region_status_read",
                regions={r["region"]: bool(r["alive"]) for r in rows},
                acting=False,
            )
        return self.active_regions()

    def active_regions(self) -> list[str]:
        """The regions this process serves: ``["default"]`` until failover is activated."""
        return [DEFAULT_REGION]

    def region_filter(self) -> RegionFilter:
        """The filter for claim and scheduler queries: the no-op one for now."""
        return ALL_REGIONS

    def iteration(self) -> Progress:
        self.refresh()
        return Progress()

    def loop_spec(self, interval_sec: float = REGION_REFRESH_INTERVAL_SEC) -> LoopSpec:
        return LoopSpec(
            name="region_refresher", interval_sec=interval_sec, iteration=self.iteration
        )
