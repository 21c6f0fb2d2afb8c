"""OpenAPI for the operator's probes: ``GET /health`` (no key) and ``GET /metrics``."""

from __future__ import annotations

from typing import Any

from chalicelib.api.openapi.common import json_content, response_ref

_HEALTH = (
    "For load balancers, no API key: 200 when this process is up and the database answers; "
    "503 DATABASE_UNAVAILABLE in the error envelope when it does not, and 503 LOOP_DOWN when "
    "a process that beat in the last 15 s reports a background loop down (restarting, or "
    "failing 3 times in a row on anything but a database outage); error.loops lists them "
    "(loop, phase, since, error type)."
)
_METRICS = (
    "Prometheus text exposition format 0.0.4, derived from the database (right whichever "
    "container answers): te_queue_depth{status,endpoint}, te_oldest_due_lag_seconds, "
    "te_executions_finished_last_minute{status}, te_attempt_duration_seconds{quantile} and "
    "te_attempts_finished_last_minute (attempts finished in the last minute), "
    "te_cron_ticks_materialized_last_minute, te_executions_reclaimed_last_minute, "
    "te_loop_up{component,loop} (1 running, 0 down)."
)

METRICS: dict[str, Any] = {
    "paths": {
        "/health": {
            "get": {
                "operationId": "getHealth",
                "summary": _HEALTH,
                "security": [],
                "responses": {
                    "200": {"description": "Up.", "content": json_content("Health")},
                    "503": {
                        "description": "The database is unreachable (DATABASE_UNAVAILABLE), "
                        "or a background loop is down (LOOP_DOWN, with error.loops).",
                        "content": json_content("Error"),
                    },
                },
            }
        },
        "/metrics": {
            "get": {
                "operationId": "getMetrics",
                "summary": _METRICS,
                "responses": {
                    "200": {
                        "description": "The exposition text.",
                        "content": {"text/plain; version=0.0.4": {"schema": {"type": "string"}}},
                    },
                    "401": response_ref("Unauthorized"),
                },
            }
        },
    },
    "schemas": {
        "Health": {
            "type": "object",
            "required": ["status", "database"],
            "properties": {
                "status": {"type": "string", "const": "ok"},
                "database": {"type": "string", "const": "ok"},
            },
        }
    },
}
