"""``GET /overview``: what the dashboard's first view shows, read in one transaction.

Executions by status, attempts per minute over the last hour (60 entries, oldest first),
the oldest due execution's lag, the workers seen (heartbeats) and, per endpoint with an
execution created in the last 24 hours, its health and those executions by outcome (the
definition and the window of a job's health on ``GET /jobs/{id}/status``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chalicelib.api.http import Resource, shown

if TYPE_CHECKING:
    from chalicelib.services.overview import Overview

resource = Resource(__name__)


def render_overview(overview: Overview) -> dict[str, Any]:
    return {
        "executions_by_status": overview.executions_by_status,
        "last_hour": [shown(m, ("minute", "succeeded", "failed")) for m in overview.last_hour],
        "oldest_due_lag_ms": overview.oldest_due_lag_ms,
        "workers": [shown(w, ("component", "status", "last_beat_at")) for w in overview.workers],
        "endpoints": [
            {**shown(e, ("endpoint", "total", "succeeded", "failed")), "health": e.health.value}
            for e in overview.endpoints
        ],
    }


@resource.route("/overview", methods=["GET"])
def get_overview() -> dict[str, Any]:
    """Executions by status, the last hour's deliveries, lag and workers."""
    return render_overview(resource.services.overview_service().overview())
