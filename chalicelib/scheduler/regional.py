"""Applies a :class:`~chalicelib.domain.regions.RegionFilter` to a named scheduler query.

Scheduler statements carry the marker ``/*region_filter*/ TRUE`` where the region condition
belongs. While the filter is inactive (single region, today) the statement runs exactly as
written; an active filter replaces the marker with its condition and adds its parameters.
"""

from __future__ import annotations

from typing import Any

from chalicelib.db.queries import Query
from chalicelib.domain.regions import RegionFilter

MARKER = "/*region_filter*/ TRUE"


def regional(query: Query, region: RegionFilter) -> tuple[str, dict[str, Any]]:
    """The statement's SQL with the region condition in place, and the extra parameters."""
    if MARKER not in query.sql:
        raise ValueError(f"query {query.name!r} has no {MARKER!r} marker")
    return query.sql.replace(MARKER, region.sql_clause()), region.params()
