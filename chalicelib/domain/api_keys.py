"""API keys as values: how one is generated, the hash it is stored and looked up by, its
scope, and the rules for a new key's name and scope.

Pure (no I/O): the API's authenticator hashes a presented key with :func:`hash_key` and
checks its :class:`Scope`; :class:`chalicelib.services.api_keys.ApiKeyService` stores that
hash for a new key.
"""

from __future__ import annotations

import hashlib
import secrets
from enum import StrEnum
from typing import Any

from chalicelib.errors import ValidationFailed

KEY_PREFIX = "te_"
MAX_NAME_LENGTH = 100


class Scope(StrEnum):
    """What a key may do; each scope allows everything the ones below it allow.

    ``read``: every GET route (the dashboard, /metrics included). ``write``: every route but
    key administration. ``admin``: every route.
    """

    READ = "read"
    WRITE = "write"
    ADMIN = "admin"

    @property
    def rank(self) -> int:
        return _RANK[self]

    def allows(self, needed: Scope) -> bool:
        return self.rank >= needed.rank


_RANK = {Scope.READ: 0, Scope.WRITE: 1, Scope.ADMIN: 2}
SCOPES = tuple(scope.value for scope in Scope)


def hash_key(key: str) -> bytes:
    """SHA-256 of the key: the only form in which a key is stored."""
    return hashlib.sha256(key.encode("utf-8")).digest()


def generate_key() -> str:
    """A new API key: ``te_`` + 32 random bytes, URL-safe."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def parse_scope(value: Any) -> Scope:
    """A scope named in a request (400 INVALID_REQUEST otherwise)."""
    if isinstance(value, str):
        try:
            return Scope(value)
        except ValueError:
            pass
    raise ValidationFailed(f"Field 'scope' must be one of: {', '.join(SCOPES)}.")


def check_key_name(value: Any) -> str:
    """A key's label: 1 to 100 printable characters (400 INVALID_REQUEST otherwise)."""
    if not isinstance(value, str) or not value.strip():
        raise ValidationFailed("Field 'name' must be a non-empty string.")
    if len(value) > MAX_NAME_LENGTH:
        raise ValidationFailed(f"Field 'name' must be at most {MAX_NAME_LENGTH} characters.")
    if not value.isprintable():
        raise ValidationFailed("Field 'name' must not contain control characters.")
    return value
