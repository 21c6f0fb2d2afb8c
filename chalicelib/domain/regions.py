"""Region awareness, inactive in single-region mode (the multi-region stub).

Every claim and scheduler query takes a :class:`RegionFilter`. Today it is a no-op (all
regions, i.e. ``'default'``); with regions on, ``sql_clause`` returns
``crdb_region = ANY(:regions)`` and the region refresher
(:mod:`chalicelib.health.region`) hands out the regions this process serves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DEFAULT_REGION = "default"


@dataclass(frozen=True)
class RegionFilter:
    """Which regions' rows a process works on. ``regions=()`` means all (the stub today)."""

    regions: tuple[str, ...] = field(default=())

    @property
    def active(self) -> bool:
        return bool(self.regions)

    def sql_clause(self, column: str = "crdb_region") -> str:
        """A SQL condition to AND into a WHERE clause (``TRUE`` while inactive)."""
        return f"{column} = ANY(:regions)" if self.active else "TRUE"

    def params(self) -> dict[str, Any]:
        return {"regions": list(self.regions)} if self.active else {}


ALL_REGIONS = RegionFilter()
