"""Routes for API keys (``admin`` keys only, :func:`chalicelib.api.auth.required_scope`):
create (the one answer that holds the key itself), list, revoke.

A key is shown by its id, name, scope and times; never its hash, and the key itself only in
the answer to the ``POST /keys`` that made it (it is not stored). Running API processes
honour a revocation within ``TE_API_KEY_CACHE_TTL_SEC`` (default 5 s).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from chalicelib.api.http import Resource, check_fields, shown
from chalicelib.api.pagination import page_response, parse_page
from chalicelib.domain.api_keys import parse_scope
from chalicelib.services.api_keys import ApiKey

resource = Resource(__name__)

KEY_FIELDS = ("key_id", "name", "created_at", "revoked_at")


def render_key(key: ApiKey) -> dict[str, Any]:
    return {**shown(key, KEY_FIELDS), "scope": key.scope.value}


@resource.route("/keys", methods=["POST"], status=201)
def create_key() -> dict[str, Any]:
    """``{"name", "scope"}`` -> the key's representation plus ``api_key``, shown once."""
    body = resource.json_body()
    check_fields(body, required=["name", "scope"])
    created = resource.services.api_key_service().create(body["name"], parse_scope(body["scope"]))
    return {**render_key(created.api_key), "api_key": created.key}


@resource.route("/keys", methods=["GET"])
def list_keys() -> dict[str, Any]:
    """Every key, revoked ones included, newest first (never a key or its hash)."""
    params: Mapping[str, str] = resource.request.query_params or {}
    page = parse_page(params)
    return page_response(
        resource.services.api_key_service().list, page, render=render_key, id_field="key_id"
    )


@resource.route("/keys/{key_id}/revoke", methods=["POST"])
def revoke_key(key_id: str) -> dict[str, Any]:
    """The key stops working (idempotent: a revoked key keeps its first ``revoked_at``)."""
    return render_key(resource.services.api_key_service().revoke(key_id))


if __name__ == "__main__":
    # This module was once a command that made keys on the database; say where that went
    # rather than exit 0 having done nothing.
    sys.exit(
        "python -m chalicelib.api.keys no longer manages keys: use `te keys create NAME "
        "--scope read|write|admin` with an admin key, or for a fresh database's first key "
        "`python -m chalicelib.migrate --first-admin-key NAME`."
    )
