"""Payload specs: a JSON Schema that job input is validated against.

A schema is checked against its declared meta-schema (``$schema``), or Draft 2020-12 when
it declares none. An unknown ``$schema`` is rejected rather than silently validated against
another draft: the client asked for rules this service cannot honour.
"""

from __future__ import annotations

from typing import Any

from chalicelib.errors import InvalidSchema, ValidationFailed


def check_schema(schema: Any) -> dict[str, Any]:
    """``schema`` if it is a JSON object and a valid JSON Schema.

    A non-object is a malformed request (400 INVALID_REQUEST); an object that breaks its
    meta-schema is 422 INVALID_SCHEMA with the validator's reason and location.
    """
    # jsonschema costs ~60 ms to import: only requests that validate a schema pay for it.
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    if not isinstance(schema, dict):
        raise ValidationFailed("Field 'schema' must be an object.")
    declared = schema.get("$schema")
    if declared is not None and not isinstance(declared, str):
        raise InvalidSchema("'$schema' must be a string naming a JSON Schema meta-schema.")
    validator = validator_for(schema, default=None if declared else Draft202012Validator)
    if validator is None:
        raise InvalidSchema(f"Unknown meta-schema in '$schema': {declared!r}.")
    try:
        validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.absolute_path) or "(root)"
        raise InvalidSchema(f"Invalid JSON Schema at {where}: {exc.message}") from exc
    return schema
