"""``GET /openapi.json``: the OpenAPI 3.1 document, assembled from each resource's fragment.

Each resource module exports ``OPENAPI = {"paths": {...}, "schemas": {...}}``; this module
adds the shared parts (security, error envelope, pagination parameters). A test compares the
document's paths and methods with the app's routes, so neither can drift from the other.
"""

from __future__ import annotations

import functools
from typing import Any

from chalicelib.api.http import Resource

resource = Resource(__name__)

ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "request_id"],
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "request_id": {"type": "string", "pattern": "^req_"},
            },
        }
    },
}

COMMON_PARAMETERS = {
    "Limit": {
        "name": "limit",
        "in": "query",
        "required": False,
        "schema": {"type": "integer", "minimum": 1, "maximum": 200, "default": 50},
    },
    "Cursor": {
        "name": "cursor",
        "in": "query",
        "required": False,
        "description": "Opaque cursor from the previous page's `cursor`.",
        "schema": {"type": "string"},
    },
}

COMMON_RESPONSES = {
    name: {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }
    for name, description in {
        "BadRequest": "INVALID_REQUEST: malformed body or parameters.",
        "Unauthorized": "UNAUTHORIZED: missing or invalid API key.",
        "NotFound": "A *_NOT_FOUND code for the resource.",
        "Conflict": "CONFLICT, JOB_NOT_UPDATABLE or EXECUTION_NOT_CANCELLABLE.",
        "PayloadTooLarge": "PAYLOAD_TOO_LARGE: body over the size limit.",
        "Unprocessable": "A 422 validation code (INVALID_SCHEMA, INVALID_CRON, ...).",
        "RateLimited": "RATE_LIMITED: slow down; see Retry-After.",
        "InternalError": "INTERNAL_ERROR.",
    }.items()
}

OPENAPI: dict[str, Any] = {
    "paths": {
        "/openapi.json": {
            "get": {
                "operationId": "getOpenApi",
                "summary": "This document (no authentication).",
                "security": [],
                "responses": {
                    "200": {
                        "description": "The OpenAPI document.",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    }
                },
            }
        }
    },
    "schemas": {"Error": ERROR_SCHEMA},
}


def _resource_modules() -> list[Any]:
    from chalicelib.api import (
        configs,
        endpoints,
        executions,
        jobs,
        payload_specs,
        secrets,
    )

    return [payload_specs, configs, secrets, endpoints, jobs, executions]


@functools.lru_cache(maxsize=1)
def openapi_document() -> dict[str, Any]:
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for fragment in [m.OPENAPI for m in _resource_modules()] + [OPENAPI]:
        for path, operations in fragment.get("paths", {}).items():
            paths.setdefault(path, {}).update(operations)
        schemas.update(fragment.get("schemas", {}))
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Task Executor",
            "version": "1.0.0",
            "description": "setTimeout and setInterval as a service.",
        },
        "servers": [{"url": "/"}],
        "security": [{"bearerAuth": []}],
        "paths": dict(sorted(paths.items())),
        "components": {
            "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}},
            "schemas": schemas,
            "parameters": COMMON_PARAMETERS,
            "responses": COMMON_RESPONSES,
        },
    }


@resource.route("/openapi.json", methods=["GET"])
def get_openapi() -> dict[str, Any]:
    """The OpenAPI 3.1 document describing every route."""
    return openapi_document()
