"""Health evaluator: defined, documented, inactive.

When a second region is added, this is the process that reads ``region_heartbeats``, decides
that a region is dead (no beat from any of its components for a grace period), writes
``region_status`` (``alive = false``, ``failed_at``, ``adopted_by``) and so lets the region
refreshers of the surviving regions widen their :class:`RegionFilter` to adopt the dead
region's rows. In single-region mode there is nothing to evaluate, so it is not started by
any entry point and :meth:`HealthEvaluator.evaluate` does nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from chalicelib.runtime.loop import LoopSpec, Progress

#: How often the evaluator will run once active, and how long a region may stay silent.
EVALUATE_INTERVAL_SEC = 10.0
DEAD_AFTER_SEC = 30.0


@dataclass(frozen=True)
class HealthEvaluator:
    """Inactive: ``active`` is False and :meth:`evaluate` decides nothing."""

    active: bool = False

    def evaluate(self) -> Progress:
        """One evaluation round. Inactive: reads nothing, writes nothing."""
        return Progress()

    def loop_spec(self) -> LoopSpec:
        return LoopSpec(
            name="health_evaluator", interval_sec=EVALUATE_INTERVAL_SEC, iteration=self.evaluate
        )
