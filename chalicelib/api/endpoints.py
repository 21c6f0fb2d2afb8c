"""``/endpoints``: registered delivery targets (HTTP, KAFKA, REDIS_STREAM).

Validation lives in :mod:`chalicelib.domain.endpoints` (shape, defaults, template
namespaces per field); this module adds the checks that need the database, in the same
transaction as the write:

* ``payload_spec`` / ``config`` naming nothing: 422 INVALID_PAYLOAD_SPEC_REF /
  INVALID_CONFIG_REF.
* ``{{secret.<name>}}`` naming a secret that does not exist: 422 TEMPLATE_RESOLUTION_FAILED.
  (``{{config.<key>}}`` keys are not checked against the config's current values: configs
  change independently and are resolved per execution.)

``PUT /endpoints/{name}`` replaces the whole definition, type included; omitted optional
fields return to their defaults. Jobs keep the snapshot taken at their creation, so an
update applies to future jobs only. ``DELETE`` is refused (409 CONFLICT naming them) while
live jobs use the endpoint (ACTIVE cron jobs, jobs with an execution not yet terminal);
finished and retired jobs are history and do not block it. It is a soft delete: the row
stays (``fk_jobs_endpoint``), the endpoint disappears from ``GET /endpoints`` and
``GET /endpoints/{name}`` (404), its jobs, executions, attempts and logs stay readable, and
registering the name again makes it live with the new definition.
"""

from __future__ import annotations

from typing import Any

from chalicelib import services
from chalicelib.api import crud
from chalicelib.api.http import Resource
from chalicelib.api.pagination import page_response, parse_page
from chalicelib.domain.endpoints import ENDPOINT_TYPES, parse_endpoint
from chalicelib.services.endpoints import EndpointView

resource = Resource(__name__)


def render(endpoint: EndpointView) -> dict[str, Any]:
    return {
        "name": endpoint.name,
        "type": endpoint.type,
        "payload_spec": endpoint.payload_spec,
        "config": endpoint.config,
        "spec": endpoint.spec,
        "retry_policy": endpoint.retry_policy,
        **crud.timestamps(endpoint),
    }


@resource.route("/endpoints", methods=["POST"], status=201)
def create_endpoint() -> dict[str, Any]:
    """Register an endpoint."""
    definition = parse_endpoint(resource.json_body())
    return render(services.endpoint_service().create(definition))


@resource.route("/endpoints", methods=["GET"])
def list_endpoints() -> dict[str, Any]:
    """List endpoints, newest first."""
    page = parse_page(resource.request.query_params)
    endpoints = services.endpoint_service().list_page(page)
    return page_response(endpoints, page, render=render, id_field="name")


@resource.route("/endpoints/{name}", methods=["GET"])
def get_endpoint(name: str) -> dict[str, Any]:
    """Get one endpoint, defaults applied."""
    return render(services.endpoint_service().get(name))


@resource.route("/endpoints/{name}", methods=["PUT"])
def update_endpoint(name: str) -> dict[str, Any]:
    """Replace an endpoint's definition (future jobs only)."""
    definition = parse_endpoint(resource.json_body(), path_name=name)
    return render(services.endpoint_service().replace(definition))


@resource.route("/endpoints/{name}", methods=["DELETE"])
def delete_endpoint(name: str) -> Any:
    """Soft-delete an endpoint unless live jobs use it."""
    services.endpoint_service().delete(name)
    return crud.no_content()


_STAMP = {"type": "string", "format": "date-time"}
_REF = {"type": ["string", "null"], "maxLength": 100}
_RETRY: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "max_attempts": {"type": "integer", "minimum": 1, "maximum": 100, "default": 1},
        "backoff": {"enum": ["fixed", "linear", "exponential"], "default": "exponential"},
        "initial_delay_ms": {"type": "integer", "minimum": 0, "default": 1000},
        "max_delay_ms": {"type": "integer", "minimum": 0, "default": 60000},
    },
}
_TIMEOUT = {"type": "integer", "minimum": 1, "maximum": 300000}
_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_SPECS = {
    "HttpSpec": {
        "type": "object",
        "additionalProperties": False,
        "required": ["url", "method"],
        "properties": {
            "url": {"type": "string", "description": "Supports {{config.*}}, {{secret.*}}."},
            "method": {"enum": ["GET", "POST", "PUT", "PATCH", "DELETE"]},
            "headers": {**_STRING_MAP, "description": "Supports {{config.*}}, {{secret.*}}."},
            "body_template": {
                "type": "object",
                "description": "Supports {{input.*}}, {{config.*}}, {{secret.*}}.",
            },
            "timeout_ms": {**_TIMEOUT, "default": 30000},
            "expected_status_codes": {
                "type": "array",
                "items": {"type": "integer", "minimum": 100, "maximum": 599},
                "default": [200, 201, 202, 204],
            },
        },
    },
    "KafkaSpec": {
        "type": "object",
        "additionalProperties": False,
        "required": ["bootstrap_servers", "topic", "value_template"],
        "properties": {
            "bootstrap_servers": {
                "type": "string",
                "description": "Supports {{config.*}}, {{secret.*}}.",
            },
            "topic": {"type": "string", "description": "Supports {{config.*}}."},
            "key_template": {
                "type": "string",
                "description": "Supports {{input.*}}, {{config.*}}.",
            },
            "value_template": {
                "type": "object",
                "description": "Supports {{input.*}}, {{config.*}}, {{secret.*}}.",
            },
            "headers": {
                **_STRING_MAP,
                "description": "Supports {{config.*}}, {{secret.*}} and, as in the "
                "specification's example, {{input.*}}.",
            },
            "acks": {"enum": ["0", "1", "all"], "default": "all"},
            "timeout_ms": {**_TIMEOUT, "default": 10000},
        },
    },
    "RedisStreamSpec": {
        "type": "object",
        "additionalProperties": False,
        "required": ["redis_url", "stream", "fields_template"],
        "properties": {
            "redis_url": {"type": "string", "description": "Supports {{config.*}}, {{secret.*}}."},
            "stream": {"type": "string", "description": "Supports {{config.*}}."},
            "fields_template": {
                "type": "object",
                "minProperties": 1,
                "description": "Supports {{input.*}}, {{config.*}}, {{secret.*}}.",
            },
            "max_len": {
                "oneOf": [
                    {"type": "integer", "minimum": 1},
                    {"type": "string", "description": "One {{config.*}} placeholder."},
                ]
            },
            "approximate_trimming": {"type": "boolean", "default": True},
            "timeout_ms": {**_TIMEOUT, "default": 3000},
        },
    },
}
_SPEC_ONE_OF = {"oneOf": [{"$ref": f"#/components/schemas/{n}"} for n in _SPECS]}
_WRITABLE = {
    "type": {"enum": list(ENDPOINT_TYPES)},
    "payload_spec": _REF,
    "config": _REF,
    "spec": {**_SPEC_ONE_OF, "description": "Validated by type; see HttpSpec, KafkaSpec, ..."},
    "retry_policy": _RETRY,
}
_UNPROCESSABLE = (
    "INVALID_PAYLOAD_SPEC_REF or INVALID_CONFIG_REF: the named payload spec or config does "
    "not exist. TEMPLATE_RESOLUTION_FAILED: a placeholder whose namespace is unknown or not "
    "supported by its field, {{config.*}} without a config, or {{secret.*}} naming a secret "
    "that does not exist."
)

#: OpenAPI fragment: {"paths": {...}, "schemas": {...}} merged by chalicelib.api.meta.
OPENAPI: dict[str, Any] = {
    "paths": crud.crud_paths(
        collection="/endpoints",
        noun="endpoint",
        schema="Endpoint",
        not_found="ENDPOINT_NOT_FOUND",
        delete_conflict="live jobs use this endpoint (ACTIVE cron jobs, jobs with an "
        "execution not yet terminal); they are named. Finished and retired jobs do not block.",
        unprocessable=_UNPROCESSABLE,
    ),
    "schemas": {
        **crud.crud_schemas(
            "Endpoint",
            properties={
                **_WRITABLE,
                "retry_policy": {**_RETRY, "required": list(_RETRY["properties"])},
            },
            writable=_WRITABLE,
            required=["type", "spec"],
        ),
        **_SPECS,
    },
}
