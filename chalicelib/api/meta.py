"""``GET /openapi.json``: the OpenAPI 3.1 document (built in :mod:`chalicelib.api.openapi`)."""

from __future__ import annotations

from typing import Any

from chalicelib.api.http import Resource
from chalicelib.api.openapi import openapi_document

resource = Resource(__name__)


@resource.route("/openapi.json", methods=["GET"])
def get_openapi() -> dict[str, Any]:
    """The OpenAPI 3.1 document describing every route."""
    return openapi_document()
