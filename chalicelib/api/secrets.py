"""``/secrets``: sensitive values endpoints reference as ``{{secret.<name>}}``.

Values are encrypted at rest (AES-256-GCM, :mod:`chalicelib.crypto`) with
``TE_SECRET_ENCRYPTION_KEY``; responses carry only the name and timestamps, never the value,
and nothing here logs it. Creating or rotating a secret without a configured key is a
server misconfiguration: 500 INTERNAL_ERROR whose message names TE_SECRET_ENCRYPTION_KEY.
A value is a non-empty string of at most 64 KiB (UTF-8). A secret that a live endpoint's
spec or the endpoint snapshot of a live job references cannot be deleted (409 CONFLICT
naming them). Unlike the other setup resources, DELETE really deletes: history names a
secret only inside snapshot text, and the ciphertext must not outlive it.
"""

from __future__ import annotations

from typing import Any

from chalicelib import services
from chalicelib.api import crud
from chalicelib.api.http import Resource, check_fields, expect_type
from chalicelib.api.pagination import page_response, parse_page
from chalicelib.domain.names import check_setup_name
from chalicelib.services.secrets import SecretView

resource = Resource(__name__)


def render(secret: SecretView) -> dict[str, Any]:
    return {"name": secret.name, **crud.timestamps(secret)}


@resource.route("/secrets", methods=["POST"], status=201)
def create_secret() -> dict[str, Any]:
    """Create a secret (the value is stored encrypted and never returned)."""
    body = resource.json_body()
    check_fields(body, required=["name", "value"])
    name = check_setup_name(body["name"])
    value = expect_type(body, "value", str)
    return render(services.secret_service().create(name, value))


@resource.route("/secrets", methods=["GET"])
def list_secrets() -> dict[str, Any]:
    """List secrets (names and timestamps only), newest first."""
    page = parse_page(resource.request.query_params)
    secrets = services.secret_service().list_page(page)
    return page_response(secrets, page, render=render, id_field="name")


@resource.route("/secrets/{name}", methods=["GET"])
def get_secret(name: str) -> dict[str, Any]:
    """Get a secret's metadata (never its value)."""
    return render(services.secret_service().get(name))


@resource.route("/secrets/{name}", methods=["PUT"])
def rotate_secret(name: str) -> dict[str, Any]:
    """Rotate a secret's value (workers pick it up within TE_SECRET_CACHE_TTL_SEC)."""
    body = resource.json_body()
    check_fields(body, required=["value"], optional=["name"])
    crud.check_body_name(body, name)
    value = expect_type(body, "value", str)
    return render(services.secret_service().replace(name, value))


@resource.route("/secrets/{name}", methods=["DELETE"])
def delete_secret(name: str) -> Any:
    """Delete a secret unless a live endpoint or live job uses it."""
    services.secret_service().delete(name)
    return crud.no_content()


_VALUE = {
    "type": "string",
    "minLength": 1,
    "writeOnly": True,
    "description": "The secret (at most 64 KiB UTF-8). Stored encrypted; never returned.",
}

#: OpenAPI fragment: {"paths": {...}, "schemas": {...}} merged by chalicelib.api.meta.
OPENAPI: dict[str, Any] = {
    "paths": crud.crud_paths(
        collection="/secrets",
        noun="secret",
        schema="Secret",
        not_found="SECRET_NOT_FOUND",
        delete_conflict="live endpoints' specs or live jobs' endpoint snapshots reference "
        "{{secret.<name>}} (they are named).",
    ),
    "schemas": crud.crud_schemas(
        "Secret", properties={}, writable={"value": _VALUE}, required=["value"]
    ),
}
OPENAPI["paths"]["/secrets"]["post"]["responses"]["500"] = {
    "$ref": "#/components/responses/InternalError",
    "description": "INTERNAL_ERROR, e.g. TE_SECRET_ENCRYPTION_KEY is not configured.",
}
OPENAPI["paths"]["/secrets/{name}"]["put"]["responses"]["500"] = OPENAPI["paths"]["/secrets"][
    "post"
]["responses"]["500"]
