"""``/payload-specs``: JSON Schemas that job input is validated against.

A schema must be valid against its declared meta-schema (Draft 2020-12 when it declares
none): otherwise 422 INVALID_SCHEMA with the reason. Names: lowercase letters, digits,
``-`` and ``_`` (:mod:`chalicelib.domain.names`). A payload spec that a live endpoint or
the endpoint snapshot of a live job references cannot be deleted (409 CONFLICT naming
them). DELETE is a soft delete (the row stays for history, marked); creating the name
again revives it with the new schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chalicelib.api import crud
from chalicelib.api.http import Resource

resource = Resource(__name__)


def _schema(body: Mapping[str, Any]) -> Any:
    return body["schema"]  # validated by the service (check_schema)


crud.value_routes(
    resource, "/payload-specs", "schema", lambda: resource.services.payload_spec_service(), _schema
)
