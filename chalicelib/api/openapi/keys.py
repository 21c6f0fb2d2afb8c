"""OpenAPI for API keys: ``POST /keys``, ``GET /keys``, ``POST /keys/{key_id}/revoke``
(admin keys only)."""

from __future__ import annotations

from typing import Any

from chalicelib.api.openapi.common import TIMESTAMP, operation, page_of, paths
from chalicelib.domain.api_keys import MAX_NAME_LENGTH, SCOPES

_SCOPE = {"type": "string", "enum": list(SCOPES)}
_CREATE = (
    "Create an API key (admin keys only). The answer holds the key itself (`api_key`): it is "
    "shown this once and never stored. Scopes: read (every GET), write (everything but key "
    "administration), admin (everything)."
)
_REVOKE = (
    "Revoke a key (admin keys only): it stops working within the API's key cache TTL "
    "(5 s by default). Idempotent: a revoked key keeps its first revoked_at."
)


def _created(built: tuple[str, str, dict[str, Any]]) -> tuple[str, str, dict[str, Any]]:
    path, method, op = built
    op["responses"]["201"] = op["responses"].pop("200")
    return path, method, op


KEYS: dict[str, Any] = {
    "paths": paths(
        _created(operation("POST", "/keys", "createKey", "CreatedKey", _CREATE, body="KeyCreate")),
        operation(
            "GET",
            "/keys",
            "listKeys",
            "KeyPage",
            "Every API key, revoked ones included, newest first (admin keys only; never a "
            "key or its hash).",
            paged=True,
        ),
        operation("POST", "/keys/{key_id}/revoke", "revokeKey", "Key", _REVOKE),
    ),
    "schemas": {
        "KeyCreate": {
            "type": "object",
            "required": ["name", "scope"],
            "additionalProperties": False,
            "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": MAX_NAME_LENGTH},
                "scope": _SCOPE,
            },
        },
        "Key": {
            "type": "object",
            "required": ["key_id", "name", "scope", "created_at", "revoked_at"],
            "properties": {
                "key_id": {"type": "string", "pattern": "^key_"},
                "name": {"type": "string"},
                "scope": _SCOPE,
                "created_at": TIMESTAMP,
                "revoked_at": TIMESTAMP,
            },
        },
        "CreatedKey": {
            "allOf": [
                {"$ref": "#/components/schemas/Key"},
                {
                    "type": "object",
                    "required": ["api_key"],
                    "properties": {
                        "api_key": {
                            "type": "string",
                            "description": "The key itself: shown in this answer only.",
                        }
                    },
                },
            ]
        },
        "KeyPage": page_of("Key"),
    },
}
