"""OpenAPI for the operator's probes: ``GET /health`` (no key) and ``GET /metrics``."""

from __future__ import annotations

from typing import Any

from chalicelib.api.openapi.common import json_content, response_ref

_LIVE = (
    "Liveness, for load balancers, no API key: 200 while this process serves requests. It "
    "reads nothing (not the database), so no other process's trouble takes it out of service."
)
_HEALTH = (
    "The whole deployment's state, for monitors, no API key: 200 with the profile and the "
    "live processes of each kind when the database answers, every kind of process that has "
    "run in the deployment (worker, scheduler) has a live one, and no process reports a "
    "background loop down. Else 503 in the error envelope: DATABASE_UNAVAILABLE; "
    "PROCESS_DOWN when the worker or the scheduler has stopped (error.kinds names them; "
    "a process is live while its heartbeat is fresh: its interval, 5 s, or for a scheduled "
    "invocation the minute until the next one, plus 10 s); LOOP_DOWN when a process that "
    "beat in the last 15 s reports a background loop down (restarting, or failing 3 times "
    "in a row on anything but a database outage; error.loops lists them: loop, phase, "
    "since, error type)."
)
_METRICS = (
    "Prometheus text exposition format 0.0.4, derived from the database (right whichever "
    "container answers): te_queue_depth{status,endpoint}, te_oldest_due_lag_seconds, "
    "te_executions_finished_last_minute{status}, te_attempt_duration_seconds{quantile} and "
    "te_attempts_finished_last_minute (attempts finished in the last minute), "
    "te_cron_ticks_materialized_last_minute, te_executions_reclaimed_last_minute, "
    "te_live_processes{kind} (api, scheduler, worker: always present, 0 when none is live), "
    "te_loop_up{component,loop} (1 running, 0 down)."
)

METRICS: dict[str, Any] = {
    "paths": {
        "/health/live": {
            "get": {
                "operationId": "getLiveness",
                "summary": _LIVE,
                "security": [],
                "responses": {
                    "200": {"description": "Serving.", "content": json_content("Liveness")},
                },
            }
        },
        "/health": {
            "get": {
                "operationId": "getHealth",
                "summary": _HEALTH,
                "security": [],
                "responses": {
                    "200": {"description": "Up.", "content": json_content("Health")},
                    "503": {
                        "description": "The database is unreachable (DATABASE_UNAVAILABLE), "
                        "a kind of process has stopped (PROCESS_DOWN, with error.kinds), or "
                        "a background loop is down (LOOP_DOWN, with error.loops).",
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
        "Liveness": {
            "type": "object",
            "required": ["status"],
            "properties": {"status": {"type": "string", "const": "ok"}},
        },
        "Health": {
            "type": "object",
            "required": ["status", "database", "profile", "processes"],
            "properties": {
                "status": {"type": "string", "const": "ok"},
                "database": {"type": "string", "const": "ok"},
                "profile": {
                    "type": "string",
                    "enum": ["full", "lean"],
                    "description": "The deployment's process shape (TE_PROFILE).",
                },
                "processes": {
                    "type": "object",
                    "description": "Live processes of each kind (api, scheduler, worker), as "
                    "te_live_processes counts them.",
                    "additionalProperties": {"type": "integer", "minimum": 0},
                },
            },
        },
    },
}
