"""``/payload-specs``: JSON Schemas that job input is validated against.

A schema must be valid against its declared meta-schema (Draft 2020-12 when it declares
none): otherwise 422 INVALID_SCHEMA with the reason. Names: lowercase letters, digits,
``-`` and ``_`` (:mod:`chalicelib.domain.names`). A payload spec that a live endpoint or
the endpoint snapshot of a live job references cannot be deleted (409 CONFLICT naming
them). DELETE is a soft delete (the row stays for history, marked); creating the name
again revives it with the new schema.
"""

from __future__ import annotations

from typing import Any

from chalicelib import services
from chalicelib.api import crud
from chalicelib.api.http import Resource, check_fields
from chalicelib.api.pagination import page_response, parse_page
from chalicelib.domain.names import check_setup_name
from chalicelib.services.payload_specs import PayloadSpecView

resource = Resource(__name__)


def render(spec: PayloadSpecView) -> dict[str, Any]:
    return {"name": spec.name, "schema": spec.schema, **crud.timestamps(spec)}


@resource.route("/payload-specs", methods=["POST"], status=201)
def create_payload_spec() -> dict[str, Any]:
    """Create a payload spec."""
    body = resource.json_body()
    check_fields(body, required=["name", "schema"])
    name = check_setup_name(body["name"])
    return render(services.payload_spec_service().create(name, body["schema"]))


@resource.route("/payload-specs", methods=["GET"])
def list_payload_specs() -> dict[str, Any]:
    """List payload specs, newest first."""
    page = parse_page(resource.request.query_params)
    specs = services.payload_spec_service().list_page(page)
    return page_response(specs, page, render=render, id_field="name")


@resource.route("/payload-specs/{name}", methods=["GET"])
def get_payload_spec(name: str) -> dict[str, Any]:
    """Get one payload spec."""
    return render(services.payload_spec_service().get(name))


@resource.route("/payload-specs/{name}", methods=["PUT"])
def update_payload_spec(name: str) -> dict[str, Any]:
    """Replace a payload spec's schema (jobs created afterwards validate against it)."""
    body = resource.json_body()
    check_fields(body, required=["schema"], optional=["name"])
    crud.check_body_name(body, name)
    return render(services.payload_spec_service().replace(name, body["schema"]))


@resource.route("/payload-specs/{name}", methods=["DELETE"])
def delete_payload_spec(name: str) -> Any:
    """Soft-delete a payload spec unless a live endpoint or live job uses it."""
    services.payload_spec_service().delete(name)
    return crud.no_content()


_SCHEMA = {
    "type": "object",
    "description": "A JSON Schema (Draft 2020-12 unless it declares another $schema).",
}

#: OpenAPI fragment: {"paths": {...}, "schemas": {...}} merged by chalicelib.api.meta.
OPENAPI: dict[str, Any] = {
    "paths": crud.crud_paths(
        collection="/payload-specs",
        noun="payload spec",
        schema="PayloadSpec",
        not_found="PAYLOAD_SPEC_NOT_FOUND",
        delete_conflict="live endpoints or live jobs' endpoint snapshots reference this "
        "payload spec (they are named).",
        unprocessable="INVALID_SCHEMA: the schema breaks its meta-schema (reason given).",
    ),
    "schemas": crud.crud_schemas(
        "PayloadSpec",
        properties={"schema": _SCHEMA},
        writable={"schema": _SCHEMA},
        required=["schema"],
    ),
}
