"""``/configs``: named key-value objects endpoints reference as ``{{config.*}}``.

``values`` is a JSON object (any JSON values). Updates take effect for future executions;
an execution keeps the snapshot its first attempt resolved. A config that a live endpoint
or the endpoint snapshot of a live job references cannot be deleted (409 CONFLICT naming
them). DELETE is a soft delete (the row stays for history, marked); creating the name
again revives it with the new values.
"""

from __future__ import annotations

from typing import Any

from chalicelib import services
from chalicelib.api import crud
from chalicelib.api.http import Resource, check_fields, expect_type
from chalicelib.api.pagination import page_response, parse_page
from chalicelib.domain.names import check_setup_name
from chalicelib.services.configs import ConfigView

resource = Resource(__name__)


def render(config: ConfigView) -> dict[str, Any]:
    return {"name": config.name, "values": config.values, **crud.timestamps(config)}


@resource.route("/configs", methods=["POST"], status=201)
def create_config() -> dict[str, Any]:
    """Create a config."""
    body = resource.json_body()
    check_fields(body, required=["name", "values"])
    name = check_setup_name(body["name"])
    values = expect_type(body, "values", dict)
    return render(services.config_service().create(name, values))


@resource.route("/configs", methods=["GET"])
def list_configs() -> dict[str, Any]:
    """List configs, newest first."""
    page = parse_page(resource.request.query_params)
    configs = services.config_service().list_page(page)
    return page_response(configs, page, render=render, id_field="name")


@resource.route("/configs/{name}", methods=["GET"])
def get_config(name: str) -> dict[str, Any]:
    """Get one config."""
    return render(services.config_service().get(name))


@resource.route("/configs/{name}", methods=["PUT"])
def update_config(name: str) -> dict[str, Any]:
    """Replace a config's values (future executions resolve against them)."""
    body = resource.json_body()
    check_fields(body, required=["values"], optional=["name"])
    crud.check_body_name(body, name)
    values = expect_type(body, "values", dict)
    return render(services.config_service().replace(name, values))


@resource.route("/configs/{name}", methods=["DELETE"])
def delete_config(name: str) -> Any:
    """Soft-delete a config unless a live endpoint or live job uses it."""
    services.config_service().delete(name)
    return crud.no_content()


_VALUES = {"type": "object", "description": "Values available to endpoints as {{config.*}}."}

#: OpenAPI fragment: {"paths": {...}, "schemas": {...}} merged by chalicelib.api.meta.
OPENAPI: dict[str, Any] = {
    "paths": crud.crud_paths(
        collection="/configs",
        noun="config",
        schema="Config",
        not_found="CONFIG_NOT_FOUND",
        delete_conflict="live endpoints or live jobs' endpoint snapshots reference this "
        "config (they are named).",
    ),
    "schemas": crud.crud_schemas(
        "Config", properties={"values": _VALUES}, writable={"values": _VALUES}, required=["values"]
    ),
}
