"""What the four setup/register routes share: rendering, the DELETE answer, PUT names, docs.

Payload specs, configs, secrets and endpoints are named resources with the same lifecycle
(create, list, get, replace, delete-unless-referenced), run by the services in
:mod:`chalicelib.services.setup`. This module holds the HTTP pieces that would otherwise be
copied four times, including the OpenAPI description of that lifecycle.

Conventions every one of them follows (and documents in OpenAPI):

* ``POST`` answers 201 with the resource; a taken name is 409 CONFLICT.
* ``PUT`` replaces the resource's value (404 if it does not exist; it never creates). A
  ``name`` in the body is optional and must equal the name in the URL.
* ``DELETE`` answers **204 No Content** with an empty body; 409 CONFLICT names dependents.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chalice import Response

from chalicelib.domain.timefmt import iso
from chalicelib.errors import ValidationFailed
from chalicelib.services.setup import Stamped


def timestamps(view: Stamped) -> dict[str, Any]:
    return {"created_at": iso(view.created_at), "updated_at": iso(view.updated_at)}


def no_content() -> Response:
    """The 204 answer of every DELETE (no body, no Content-Type)."""
    return Response(body="", status_code=204, headers={})


def check_body_name(body: Mapping[str, Any], name: str) -> None:
    """A PUT body may repeat the resource's name, but not change it."""
    if body.get("name") not in (None, name):
        raise ValidationFailed("Field 'name' cannot change: it must match the URL.")


# -- OpenAPI -------------------------------------------------------------------------------


def _json(schema_ref: str) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema_ref}"}}}


def _ref(name: str, description: str | None = None) -> dict[str, Any]:
    ref: dict[str, Any] = {"$ref": f"#/components/responses/{name}"}
    if description:
        ref["description"] = description
    return ref


COMMON_ERRORS = {
    "401": _ref("Unauthorized"),
    "429": _ref("RateLimited"),
    "500": _ref("InternalError"),
}
BODY_ERRORS = {
    "400": _ref("BadRequest"),
    "413": _ref("PayloadTooLarge"),
    "415": _ref("BadRequest", "UNSUPPORTED_MEDIA_TYPE: Content-Type must be application/json."),
}


def crud_paths(
    *,
    collection: str,
    noun: str,
    schema: str,
    not_found: str,
    delete_conflict: str,
    unprocessable: str | None = None,
) -> dict[str, Any]:
    """OpenAPI paths for ``collection`` and ``collection/{name}`` (the shared lifecycle).

    Component schemas ``<schema>``, ``<schema>Create``, ``<schema>Update`` and
    ``<schema>List`` must exist in the caller's fragment.
    """
    item = f"{collection}/{{name}}"
    tag = collection.strip("/")
    write_errors: dict[str, Any] = {**BODY_ERRORS}
    if unprocessable:
        write_errors["422"] = _ref("Unprocessable", unprocessable)
    name_param = [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}]
    missing = _ref("NotFound", f"{not_found}: no {noun} with this name.")
    return {
        collection: {
            "post": {
                "operationId": f"create{schema}",
                "tags": [tag],
                "summary": f"Create a {noun}.",
                "requestBody": {"required": True, "content": _json(f"{schema}Create")},
                "responses": {
                    "201": {"description": f"The new {noun}.", "content": _json(schema)},
                    "409": _ref("Conflict", f"CONFLICT: a {noun} with this name exists."),
                    **write_errors,
                    **COMMON_ERRORS,
                },
            },
            "get": {
                "operationId": f"list{schema}s",
                "tags": [tag],
                "summary": f"List {noun}s, newest first (cursor pagination).",
                "parameters": [
                    {"$ref": "#/components/parameters/Limit"},
                    {"$ref": "#/components/parameters/Cursor"},
                ],
                "responses": {
                    "200": {"description": "One page.", "content": _json(f"{schema}List")},
                    "400": _ref("BadRequest", "INVALID_REQUEST: bad limit or cursor."),
                    **COMMON_ERRORS,
                },
            },
        },
        item: {
            "parameters": name_param,
            "get": {
                "operationId": f"get{schema}",
                "tags": [tag],
                "summary": f"Get a {noun}.",
                "responses": {
                    "200": {"description": f"The {noun}.", "content": _json(schema)},
                    "404": missing,
                    **COMMON_ERRORS,
                },
            },
            "put": {
                "operationId": f"update{schema}",
                "tags": [tag],
                "summary": f"Replace a {noun} (it must exist; PUT never creates).",
                "requestBody": {"required": True, "content": _json(f"{schema}Update")},
                "responses": {
                    "200": {"description": f"The updated {noun}.", "content": _json(schema)},
                    "404": missing,
                    **write_errors,
                    **COMMON_ERRORS,
                },
            },
            "delete": {
                "operationId": f"delete{schema}",
                "tags": [tag],
                "summary": f"Delete a {noun} unless something still references it.",
                "responses": {
                    "204": {"description": "Deleted; empty body."},
                    "404": missing,
                    "409": _ref("Conflict", f"CONFLICT: {delete_conflict}"),
                    **COMMON_ERRORS,
                },
            },
        },
    }


def crud_schemas(
    schema: str,
    *,
    properties: dict[str, Any],
    writable: dict[str, Any],
    required: list[str],
) -> dict[str, Any]:
    """``<schema>``, ``<schema>Create``, ``<schema>Update`` and ``<schema>List``."""
    stamp = {"type": "string", "format": "date-time"}
    name = {"type": "string", "maxLength": 100}
    return {
        schema: {
            "type": "object",
            "required": ["name", *properties, "created_at", "updated_at"],
            "properties": {"name": name, **properties, "created_at": stamp, "updated_at": stamp},
        },
        f"{schema}Create": {
            "type": "object",
            "additionalProperties": False,
            "required": ["name", *required],
            "properties": {"name": name, **writable},
        },
        f"{schema}Update": {
            "type": "object",
            "additionalProperties": False,
            "required": required,
            "properties": {
                "name": {**name, "description": "Optional; must match the URL."},
                **writable,
            },
        },
        f"{schema}List": {
            "type": "object",
            "required": ["items", "cursor"],
            "properties": {
                "items": {"type": "array", "items": {"$ref": f"#/components/schemas/{schema}"}},
                "cursor": {
                    "type": ["string", "null"],
                    "description": "Pass as ?cursor= for the next page; null on the last.",
                },
            },
        },
    }
