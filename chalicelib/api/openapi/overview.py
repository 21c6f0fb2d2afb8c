"""OpenAPI for the operator's surface: ``GET /overview`` and the dashboard (``/ui``)."""

from __future__ import annotations

from typing import Any

from chalicelib.api.openapi.common import TIMESTAMP, operation, paths
from chalicelib.domain.health import Health

_COUNT = {"type": "integer", "minimum": 0}
_OUTCOMES = {"succeeded": _COUNT, "failed": _COUNT}

_OVERVIEW = (
    "Executions by status (every status, 0 included), attempts finished per minute over "
    "the last hour (60 entries, oldest first, the current minute last), the lag of the "
    "oldest due QUEUED/RETRYING execution of an endpoint that is not paused (null when "
    "none is due), the worker processes whose heartbeats were seen in the last hour (DEAD "
    "when stopped or silent for 30 s), and per endpoint with executions that ended in the "
    "last 24 hours or are live its health, those executions (total) and the ended ones by "
    "outcome (the health of GET /jobs/{job_id}/status, same thresholds)."
)


def _page(op_id: str, summary: str, content_type: str) -> dict[str, Any]:
    return {
        "operationId": op_id,
        "summary": summary,
        "security": [],
        "responses": {
            "200": {
                "description": summary,
                "content": {content_type: {"schema": {"type": "string"}}},
            },
            "404": {"$ref": "#/components/responses/NotFound"},
        },
    }


_FILE = _page(
    "getDashboardFile",
    "A script, style sheet or image of the dashboard (no authentication).",
    "text/javascript",
)
_FILE["parameters"] = [
    {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
]
_INDEX = _page(
    "getDashboard",
    "The dashboard: a page over this API; the key is typed in the page (no authentication).",
    "text/html",
)
del _INDEX["responses"]["404"]

OVERVIEW: dict[str, Any] = {
    "paths": {
        **paths(operation("GET", "/overview", "getOverview", "Overview", _OVERVIEW)),
        "/ui": {"get": _INDEX},
        "/ui/{name}": {"get": _FILE},
    },
    "schemas": {
        "Overview": {
            "type": "object",
            "required": ["executions_by_status", "last_hour", "oldest_due_lag_ms", "workers"],
            "properties": {
                "executions_by_status": {
                    "type": "object",
                    "description": "Every status: RUNNING counts the executions in delivery"
                    " now; PENDING, QUEUED and RETRYING as the scheduler last counted them"
                    " (every 15 s); ended ones (SUCCESS, FAILED, CANCELLED) those that ended"
                    " in the last day (24 to 25 hours).",
                    "additionalProperties": _COUNT,
                },
                "last_hour": {
                    "type": "array",
                    "minItems": 60,
                    "maxItems": 60,
                    "items": {
                        "type": "object",
                        "required": ["minute", "succeeded", "failed"],
                        "properties": {"minute": TIMESTAMP, **_OUTCOMES},
                    },
                },
                "oldest_due_lag_ms": {"type": ["integer", "null"], "minimum": 0},
                "workers": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["component", "status", "last_beat_at"],
                        "properties": {
                            "component": {"type": "string"},
                            "status": {"type": "string", "enum": ["ALIVE", "DEAD"]},
                            "last_beat_at": TIMESTAMP,
                        },
                    },
                },
                "endpoints": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["endpoint", "health", "total", "succeeded", "failed"],
                        "properties": {
                            "endpoint": {"type": "string"},
                            "health": {"type": "string", "enum": [h.value for h in Health]},
                            "total": _COUNT,
                            **_OUTCOMES,
                        },
                    },
                },
            },
        }
    },
}
