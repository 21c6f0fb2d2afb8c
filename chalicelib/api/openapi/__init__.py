"""The OpenAPI 3.1 document, apart from the routes it describes.

One fragment per resource (``{"paths": {...}, "schemas": {...}}``) in the modules of this
package; :func:`openapi_document` is the one helper that merges them with the shared parts
(security, error envelope, pagination parameters, shared responses), and documents the 403
of every operation a ``read`` key may not call (the rule the API enforces,
:func:`chalicelib.api.auth.required_scope`). The query parameters it documents are the ones
each route accepts: the middleware refuses any other (:func:`query_parameters`).
``GET /openapi.json``
(:mod:`chalicelib.api.meta`) serves it. Tests compare the document's paths and methods with
the app's routes, and the whole document with a snapshot, so neither can drift.
"""

from __future__ import annotations

import functools
from typing import Any

from chalicelib.api.auth import required_scope
from chalicelib.api.openapi.batches import BATCHES
from chalicelib.api.openapi.catalogue import CONFIGS, PAYLOAD_SPECS, SECRETS
from chalicelib.api.openapi.common import COMMON_PARAMETERS, COMMON_RESPONSES, ERROR_SCHEMA
from chalicelib.api.openapi.dead_letters import DEAD_LETTERS
from chalicelib.api.openapi.endpoints import ENDPOINTS
from chalicelib.api.openapi.executions import EXECUTIONS
from chalicelib.api.openapi.jobs import JOBS
from chalicelib.api.openapi.keys import KEYS
from chalicelib.api.openapi.metrics import METRICS
from chalicelib.api.openapi.operations import OPERATIONS
from chalicelib.api.openapi.overview import OVERVIEW
from chalicelib.api.openapi.topics import TOPICS
from chalicelib.domain.api_keys import Scope

_SCOPES = (
    "An API key (`Authorization: Bearer <key>`) with a scope: `read` keys may call every GET "
    "route, `write` keys every route but key administration (`/keys`), `admin` keys every "
    "route. A key whose scope does not allow a route gets 403 INSUFFICIENT_SCOPE."
)

_META: dict[str, Any] = {
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


@functools.lru_cache(maxsize=1)
def openapi_document() -> dict[str, Any]:
    """The whole document: every fragment's paths and schemas, plus the shared parts."""
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    resources = (PAYLOAD_SPECS, CONFIGS, SECRETS, ENDPOINTS, TOPICS, JOBS, BATCHES, EXECUTIONS)
    for fragment in (*resources, DEAD_LETTERS, OPERATIONS, METRICS, OVERVIEW, KEYS, _META):
        for path, operations in fragment.get("paths", {}).items():
            paths.setdefault(path, {}).update(operations)
        schemas.update(fragment.get("schemas", {}))
    _document_scopes(paths)
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
            "securitySchemes": {
                "bearerAuth": {"type": "http", "scheme": "bearer", "description": _SCOPES}
            },
            "schemas": schemas,
            "parameters": COMMON_PARAMETERS,
            "responses": COMMON_RESPONSES,
        },
    }


def _document_scopes(paths: dict[str, Any]) -> None:
    """A 403 response on every keyed operation that needs more than a ``read`` key."""
    for path, item in paths.items():
        for method, operation in item.items():
            if not isinstance(operation, dict) or operation.get("security") == []:
                continue
            if required_scope(method, path) != Scope.READ:
                operation["responses"].setdefault(
                    "403", {"$ref": "#/components/responses/Forbidden"}
                )


@functools.lru_cache(maxsize=1)
def query_parameters() -> dict[tuple[str, str], frozenset[str]]:
    """``(METHOD, path) -> the names of its query parameters``, as the document declares
    them (the path's and the operation's, shared ones resolved): what each route accepts."""
    document = openapi_document()
    shared = document["components"]["parameters"]
    accepted: dict[tuple[str, str], frozenset[str]] = {}
    for path, item in document["paths"].items():
        common = item.get("parameters", [])
        for method, operation in item.items():
            if not isinstance(operation, dict) or method == "parameters":
                continue
            declared = [*common, *operation.get("parameters", [])]
            resolved = (shared[p["$ref"].rsplit("/", 1)[1]] if "$ref" in p else p for p in declared)
            names = frozenset(p["name"] for p in resolved if p["in"] == "query")
            accepted[(method.upper(), path)] = names
    return accepted
