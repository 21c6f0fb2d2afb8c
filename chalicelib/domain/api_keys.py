"""API keys as values: how one is generated and the hash it is stored and looked up by.

Pure (no I/O): the API's authenticator hashes a presented key with :func:`hash_key`, and
:class:`chalicelib.services.api_keys.ApiKeyService` stores that hash for a new key.
"""

from __future__ import annotations

import hashlib
import secrets

KEY_PREFIX = "te_"


def hash_key(key: str) -> bytes:
    """SHA-256 of the key: the only form in which a key is stored."""
    return hashlib.sha256(key.encode("utf-8")).digest()


def generate_key() -> str:
    """A new API key: ``te_`` + 32 random bytes, URL-safe."""
    return KEY_PREFIX + secrets.token_urlsafe(32)
