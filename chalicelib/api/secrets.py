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

import logging
from collections.abc import Mapping
from typing import Any

from chalicelib import wiring
from chalicelib.api import crud
from chalicelib.api.http import Resource, check_fields, expect_type
from chalicelib.api.pagination import page_response, parse_page
from chalicelib.crypto import SecretBox
from chalicelib.db.connection import Transaction
from chalicelib.domain.names import check_setup_name
from chalicelib.domain.templates import secret_names
from chalicelib.errors import Conflict, SecretNotFound, ValidationFailed
from chalicelib.logs import log_event
from chalicelib.repositories import setup as repo

log = logging.getLogger(__name__)

resource = Resource(__name__)

MAX_SECRET_BYTES = 64 * 1024


def render(row: Mapping[str, Any]) -> dict[str, Any]:
    return {"name": row["name"], **crud.timestamps(row)}


def _not_found(name: str) -> SecretNotFound:
    return SecretNotFound(f"Secret '{name}' does not exist.")


def _sealed_value(body: Mapping[str, Any], name: str) -> bytes:
    """Validate ``value`` and encrypt it (before any transaction: pure CPU, re-run safe)."""
    value = expect_type(body, "value", str)
    if not value:
        raise ValidationFailed("Field 'value' must be a non-empty string.")
    if len(value.encode("utf-8")) > MAX_SECRET_BYTES:
        raise ValidationFailed(f"Field 'value' must be at most {MAX_SECRET_BYTES} bytes.")
    _, older = wiring.encryption_keys()
    return SecretBox(wiring.require_encryption_key(), older).encrypt(name, value)


@resource.route("/secrets", methods=["POST"], status=201)
def create_secret() -> dict[str, Any]:
    """Create a secret (the value is stored encrypted and never returned)."""
    body = resource.json_body()
    check_fields(body, required=["name", "value"])
    name = check_setup_name(body["name"])
    sealed = _sealed_value(body, name)
    row = crud.read(lambda tx: repo.insert(tx, "secret", name, sealed), name="secret_create")
    if row is None:
        raise Conflict(f"Secret '{name}' already exists.")
    log_event(log, "secret_created", secret=name)
    return render(row)


@resource.route("/secrets", methods=["GET"])
def list_secrets() -> dict[str, Any]:
    """List secrets (names and timestamps only), newest first."""
    page = parse_page(resource.request.query_params)
    rows = crud.database().transaction(
        lambda tx: repo.list_page(tx, "secret", page), name="secret_list"
    )
    return page_response(rows, page, render=render, id_field="name")


@resource.route("/secrets/{name}", methods=["GET"])
def get_secret(name: str) -> dict[str, Any]:
    """Get a secret's metadata (never its value)."""
    row = crud.read(lambda tx: repo.get(tx, "secret", name), name="secret_get")
    if row is None:
        raise _not_found(name)
    return render(row)


@resource.route("/secrets/{name}", methods=["PUT"])
def rotate_secret(name: str) -> dict[str, Any]:
    """Rotate a secret's value (workers pick it up within TE_SECRET_CACHE_TTL_SEC)."""
    body = resource.json_body()
    check_fields(body, required=["value"], optional=["name"])
    crud.check_body_name(body, name)
    sealed = _sealed_value(body, name)
    row = crud.read(lambda tx: repo.update(tx, "secret", name, sealed), name="secret_rotate")
    if row is None:
        raise _not_found(name)
    log_event(log, "secret_rotated", secret=name)
    return render(row)


def _endpoints_referencing(tx: Transaction, name: str) -> list[str]:
    candidates = repo.endpoint_specs_mentioning_secret(tx, name)
    return [str(r["name"]) for r in candidates if name in secret_names(r["spec"])]


def delete_unreferenced(tx: Transaction, name: str) -> None:
    """Delete a secret unless a live endpoint or live job uses it (one transaction).

    Registration reads the secrets it references in its own transaction, and job creation
    inserts rows the live-job read ranges over, so at SERIALIZABLE a registration or job
    creation racing this delete makes one of the two retry (40001) and then see the other's
    outcome: no live work is left referencing a deleted secret.
    """
    if repo.get(tx, "secret", name) is None:
        raise _not_found(name)
    crud.refuse_if_used(
        f"Secret '{name}'",
        endpoints=_endpoints_referencing(tx, name),
        jobs=repo.live_jobs_using(tx, "secret", name),
    )
    repo.delete(tx, "secret", name)


@resource.route("/secrets/{name}", methods=["DELETE"])
def delete_secret(name: str) -> Any:
    """Delete a secret unless a live endpoint or live job uses it."""
    response = crud.delete_in_transaction(
        lambda tx: delete_unreferenced(tx, name), name="secret_delete"
    )
    log_event(log, "secret_deleted", secret=name)
    return response


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
