"""OpenAPI for the catalogue resources: payload specs, configs and secrets.

Conventions every catalogue and register resource follows (endpoints too):

* ``POST`` answers 201 with the resource; a taken name is 409 CONFLICT.
* ``PUT`` replaces the resource's value (404 if it does not exist; it never creates). A
  ``name`` in the body is optional and must equal the name in the URL.
* ``DELETE`` answers **204 No Content** with an empty body; 409 CONFLICT names dependents.

:func:`crud_paths` and :func:`crud_schemas` describe that lifecycle once.
"""

from __future__ import annotations

from typing import Any

from chalicelib.api.openapi.common import (
    PAGE,
    json_content,
    path_param,
    request_body,
    response_ref,
    schema_ref,
)

COMMON_ERRORS = {
    "401": response_ref("Unauthorized"),
    "429": response_ref("RateLimited"),
    "500": response_ref("InternalError"),
}
BODY_ERRORS = {
    "400": response_ref("BadRequest"),
    "413": response_ref("PayloadTooLarge"),
    "415": response_ref(
        "BadRequest", "UNSUPPORTED_MEDIA_TYPE: Content-Type must be application/json."
    ),
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
        write_errors["422"] = response_ref("Unprocessable", unprocessable)
    name_param = [path_param("name")]
    missing = response_ref("NotFound", f"{not_found}: no {noun} with this name.")
    return {
        collection: {
            "post": {
                "operationId": f"create{schema}",
                "tags": [tag],
                "summary": f"Create a {noun}.",
                "requestBody": request_body(f"{schema}Create"),
                "responses": {
                    "201": {"description": f"The new {noun}.", "content": json_content(schema)},
                    "409": response_ref("Conflict", f"CONFLICT: a {noun} with this name exists."),
                    **write_errors,
                    **COMMON_ERRORS,
                },
            },
            "get": {
                "operationId": f"list{schema}s",
                "tags": [tag],
                "summary": f"List {noun}s, newest first (cursor pagination).",
                "parameters": PAGE,
                "responses": {
                    "200": {"description": "One page.", "content": json_content(f"{schema}List")},
                    "400": response_ref("BadRequest", "INVALID_REQUEST: bad limit or cursor."),
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
                    "200": {"description": f"The {noun}.", "content": json_content(schema)},
                    "404": missing,
                    **COMMON_ERRORS,
                },
            },
            "put": {
                "operationId": f"update{schema}",
                "tags": [tag],
                "summary": f"Replace a {noun} (it must exist; PUT never creates).",
                "requestBody": request_body(f"{schema}Update"),
                "responses": {
                    "200": {"description": f"The updated {noun}.", "content": json_content(schema)},
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
                    "409": response_ref("Conflict", f"CONFLICT: {delete_conflict}"),
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
                "items": {"type": "array", "items": schema_ref(schema)},
                "cursor": {
                    "type": ["string", "null"],
                    "description": "Pass as ?cursor= for the next page; null on the last.",
                },
            },
        },
    }


def crud_fragment(
    noun: str,
    *,
    properties: dict[str, Any],
    writable: dict[str, Any] | None = None,
    required: list[str],
    conflict: str,
    unprocessable: str | None = None,
) -> dict[str, Any]:
    """Paths and schemas of the collection named after ``noun`` ("payload spec" ->
    ``/payload-specs``, schema ``PayloadSpec``, 404 code ``PAYLOAD_SPEC_NOT_FOUND``).

    ``properties`` are shown in responses, ``writable`` (default: the same) accepted in
    bodies, ``required`` in both POST and PUT bodies; ``conflict`` says who blocks a delete.
    """
    schema = "".join(word.capitalize() for word in noun.split())
    paths = crud_paths(
        collection="/" + noun.replace(" ", "-") + "s",
        noun=noun,
        schema=schema,
        not_found=noun.upper().replace(" ", "_") + "_NOT_FOUND",
        delete_conflict=conflict,
        unprocessable=unprocessable,
    )
    writable = properties if writable is None else writable
    schemas = crud_schemas(schema, properties=properties, writable=writable, required=required)
    return {"paths": paths, "schemas": schemas}


_SNAPSHOT_USERS = (
    "live endpoints or live jobs' endpoint snapshots reference this {} (they are named)."
)
_VALUES = {"type": "object", "description": "Values available to endpoints as {{config.*}}."}
_SCHEMA = {
    "type": "object",
    "description": "A JSON Schema (Draft 2020-12 unless it declares another $schema).",
}
_VALUE = {
    "type": "string",
    "minLength": 1,
    "writeOnly": True,
    "description": "The secret (at most 64 KiB UTF-8). Stored encrypted; never returned.",
}
_INVALID_SCHEMA = "INVALID_SCHEMA: the schema breaks its meta-schema (reason given)."
_PLACEHOLDER_USERS = (
    "live endpoints' specs or live jobs' endpoint snapshots reference "
    "{{secret.<name>}} or sign with it (spec.signing_secret); they are named."
)

CONFIGS = crud_fragment(
    "config",
    properties={"values": _VALUES},
    required=["values"],
    conflict=_SNAPSHOT_USERS.format("config"),
)
PAYLOAD_SPECS = crud_fragment(
    "payload spec",
    properties={"schema": _SCHEMA},
    required=["schema"],
    conflict=_SNAPSHOT_USERS.format("payload spec"),
    unprocessable=_INVALID_SCHEMA,
)
SECRETS = crud_fragment(
    "secret",
    properties={},
    writable={"value": _VALUE},
    required=["value"],
    conflict=_PLACEHOLDER_USERS,
)

_NO_KEY = response_ref(
    "InternalError", "INTERNAL_ERROR, e.g. TE_SECRET_ENCRYPTION_KEY is not configured."
)
SECRETS["paths"]["/secrets"]["post"]["responses"]["500"] = _NO_KEY
SECRETS["paths"]["/secrets/{name}"]["put"]["responses"]["500"] = _NO_KEY
SECRETS["paths"]["/secrets/{name}"]["put"]["responses"]["422"] = response_ref(
    "Unprocessable",
    "INVALID_SIGNING_SECRET: endpoints or live jobs sign with this secret and the new value "
    "is not 'whsec_' + the base64 of a 24-64 byte key. A whsec_ value replacing another "
    "keeps the previous key signing too for TE_SIGNING_ROTATION_WINDOW_SEC.",
)
CONFIGS["paths"]["/configs/{name}"]["put"]["responses"]["403"] = {
    "$ref": "#/components/responses/Forbidden",
    "description": (
        "INSUFFICIENT_SCOPE: the key's scope does not allow the route, or live endpoints "
        "(or live jobs' endpoint snapshots) resolving this config also send {{secret.*}} and "
        "the key is not 'admin' (the values can choose where the secrets go); nothing is "
        "written."
    ),
}
