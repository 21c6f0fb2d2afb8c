"""``/endpoints``: registered delivery targets (HTTP, KAFKA, REDIS_STREAM).

Validation lives in :mod:`chalicelib.domain.endpoints` (shape, defaults, template
namespaces per field, target URLs: 422 INVALID_TARGET for one that can never be delivered
to); this module adds the checks that need the database, in the same
transaction as the write:

* ``payload_spec`` / ``config`` naming nothing: 422 INVALID_PAYLOAD_SPEC_REF /
  INVALID_CONFIG_REF.
* ``{{secret.<name>}}`` naming a secret that does not exist: 422 TEMPLATE_RESOLUTION_FAILED.
* ``{{secret.<name>}}`` anywhere in the templates of a POST or PUT needs an ``admin`` key
  (403 INSUFFICIENT_SCOPE otherwise, checked before anything is read or written):
  whoever picks where a secret is sent can read it.
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

from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from chalicelib.api import crud
from chalicelib.api.auth import authorize_secret_templates, principal_of
from chalicelib.api.http import Resource, shown
from chalicelib.api.pagination import page_response, parse_page
from chalicelib.domain.endpoint_listing import parse_endpoint_filter
from chalicelib.domain.endpoints import EndpointDefinition, parse_endpoint
from chalicelib.domain.ordering import (
    decode_key_cursor,
    encode_key_cursor,
    parse_ordering_key_state,
)
from chalicelib.domain.timefmt import iso
from chalicelib.services.endpoints import EndpointView

resource = Resource(__name__)


ENDPOINT_RESPONSE_FIELDS = (
    "name",
    "type",
    "payload_spec",
    "config",
    "spec",
    "retry_policy",
    "created_at",
    "updated_at",
)


def render(endpoint: EndpointView) -> dict[str, Any]:
    """An endpoint with its defaults applied; its default callbacks when it has them."""
    body = shown(endpoint, ENDPOINT_RESPONSE_FIELDS)
    for name in ("on_success", "on_failure"):
        if (value := getattr(endpoint, name)) is not None:
            body[name] = value
    body.update(_controls(endpoint))
    return body


def _controls(endpoint: EndpointView) -> dict[str, Any]:
    """Flow control (only when set) and the operator state every endpoint shows."""
    shown_flow = {} if endpoint.flow_control is None else {"flow_control": endpoint.flow_control}
    shown_ordering = {} if endpoint.ordering is None else {"ordering": endpoint.ordering}
    return {
        **shown_flow,
        **shown_ordering,
        "paused_at": iso(endpoint.paused_at),
        "paused_reason": endpoint.paused_reason,
        "held_until": iso(endpoint.held_until),
        "auto_pause_after_ms": endpoint.auto_pause_after_ms,
    }


def _authorize_secrets(definition: EndpointDefinition, method: str, path: str) -> None:
    """Templates that reference secrets need an ``admin`` key (403 before anything is
    written): the key that picks a secret's target could read the secret there."""
    principal = principal_of(resource.request.context)
    authorize_secret_templates(principal, definition.secrets, method, path)


@resource.route("/endpoints", methods=["POST"], status=201)
def create_endpoint() -> dict[str, Any]:
    """Register an endpoint."""
    definition = parse_endpoint(resource.json_body())
    _authorize_secrets(definition, "POST", "/endpoints")
    return render(resource.services.endpoint_service().create(definition))


@resource.route("/endpoints", methods=["GET"])
def list_endpoints() -> dict[str, Any]:
    """List endpoints, newest first; filters paused (true|false) and health."""
    params = resource.request.query_params
    page = parse_page(params)
    wanted = parse_endpoint_filter(params)
    service = resource.services.endpoint_service()
    return page_response(
        lambda part: service.list_page(part, wanted), page, render=render, id_field="name"
    )


@resource.route("/endpoints/{name}", methods=["GET"])
def get_endpoint(name: str) -> dict[str, Any]:
    """Get one endpoint, defaults applied."""
    return render(resource.services.endpoint_service().get(name))


@resource.route("/endpoints/{name}", methods=["PUT"])
def update_endpoint(name: str) -> dict[str, Any]:
    """Replace an endpoint's definition (future jobs only)."""
    definition = parse_endpoint(resource.json_body(), path_name=name)
    _authorize_secrets(definition, "PUT", f"/endpoints/{name}")
    return render(resource.services.endpoint_service().replace(definition))


@resource.route("/endpoints/{name}", methods=["DELETE"])
def delete_endpoint(name: str) -> Any:
    """Soft-delete an endpoint unless live jobs use it."""
    resource.services.endpoint_service().delete(name)
    return crud.no_content()


@resource.route("/endpoints/{name}/pause", methods=["POST"])
def pause_endpoint(name: str) -> dict[str, Any]:
    """Pause: no execution of the endpoint is claimed until resumed (idempotent)."""
    return render(resource.services.endpoint_service().pause(name))


@resource.route("/endpoints/{name}/resume", methods=["POST"])
def resume_endpoint(name: str) -> dict[str, Any]:
    """Resume a paused endpoint (idempotent)."""
    return render(resource.services.endpoint_service().resume(name))


@resource.route("/endpoints/{name}/ordering-keys", methods=["GET"])
def list_ordering_keys(name: str) -> dict[str, Any]:
    """The endpoint's blocked ordering keys (``state=blocked``, the one state listed), by
    key, each with the failed execution it waits on and since when."""
    params: Mapping[str, str] = resource.request.query_params or {}
    parse_ordering_key_state(params.get("state"))
    page = parse_page({k: v for k, v in params.items() if k != "cursor"})
    after = decode_key_cursor(params["cursor"]) if params.get("cursor") else None
    keys, more = resource.services.endpoint_service().blocked_keys(
        name, after=after, limit=page.limit
    )
    items = [{"key": k.key, "execution_id": k.execution_id, "since": iso(k.since)} for k in keys]
    cursor = encode_key_cursor(keys[-1].key) if more and keys else None
    return {"items": items, "cursor": cursor}


@resource.route("/endpoints/{name}/ordering-keys/{key}/skip", methods=["POST"])
def skip_ordering_key(name: str, key: str) -> dict[str, Any]:
    """Unblock a blocked ordering key: its failed head stays FAILED, the next execution of
    the key starts (409 ORDERING_KEY_NOT_BLOCKED when the key is not blocked)."""
    key = unquote(key)
    resource.services.endpoint_service().skip_key(name, key)
    return {"endpoint": name, "key": key, "state": "released"}
