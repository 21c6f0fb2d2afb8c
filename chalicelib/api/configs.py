"""``/configs``: named key-value objects endpoints reference as ``{{config.*}}``.

``values`` is a JSON object (any JSON values). Updates take effect for future executions;
an execution keeps the snapshot its first attempt resolved. A config that a live endpoint
or the endpoint snapshot of a live job references cannot be deleted (409 CONFLICT naming
them). DELETE is a soft delete (the row stays for history, marked); creating the name
again revives it with the new values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chalicelib.api import crud
from chalicelib.api.http import Resource, check_fields, expect_type
from chalicelib.api.pagination import page_response, parse_page
from chalicelib.db.connection import Transaction
from chalicelib.domain.names import check_setup_name
from chalicelib.errors import ConfigNotFound, Conflict
from chalicelib.repositories import setup as repo

resource = Resource(__name__)


def render(row: Mapping[str, Any]) -> dict[str, Any]:
    return {"name": row["name"], "values": row["value"], **crud.timestamps(row)}


def _not_found(name: str) -> ConfigNotFound:
    return ConfigNotFound(f"Config '{name}' does not exist.")


@resource.route("/configs", methods=["POST"], status=201)
def create_config() -> dict[str, Any]:
    """Create a config."""
    body = resource.json_body()
    check_fields(body, required=["name", "values"])
    name = check_setup_name(body["name"])
    values = expect_type(body, "values", dict)
    row = crud.read(lambda tx: repo.insert(tx, "config", name, values), name="config_create")
    if row is None:
        raise Conflict(f"Config '{name}' already exists.")
    return render(row)


@resource.route("/configs", methods=["GET"])
def list_configs() -> dict[str, Any]:
    """List configs, newest first."""
    page = parse_page(resource.request.query_params)
    rows = crud.database().transaction(
        lambda tx: repo.list_page(tx, "config", page), name="config_list"
    )
    return page_response(rows, page, render=render, id_field="name")


@resource.route("/configs/{name}", methods=["GET"])
def get_config(name: str) -> dict[str, Any]:
    """Get one config."""
    row = crud.read(lambda tx: repo.get(tx, "config", name), name="config_get")
    if row is None:
        raise _not_found(name)
    return render(row)


@resource.route("/configs/{name}", methods=["PUT"])
def update_config(name: str) -> dict[str, Any]:
    """Replace a config's values (future executions resolve against them)."""
    body = resource.json_body()
    check_fields(body, required=["values"], optional=["name"])
    crud.check_body_name(body, name)
    values = expect_type(body, "values", dict)
    row = crud.read(lambda tx: repo.update(tx, "config", name, values), name="config_update")
    if row is None:
        raise _not_found(name)
    return render(row)


@resource.route("/configs/{name}", methods=["DELETE"])
def delete_config(name: str) -> Any:
    """Soft-delete a config unless a live endpoint or live job uses it."""

    def work(tx: Transaction) -> None:
        if repo.get(tx, "config", name) is None:
            raise _not_found(name)
        crud.refuse_if_used(
            f"Config '{name}'",
            endpoints=repo.endpoints_using(tx, "config", name),
            jobs=repo.live_jobs_using(tx, "config", name),
        )
        repo.delete(tx, "config", name)

    return crud.delete_in_transaction(work, name="config_delete")


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
