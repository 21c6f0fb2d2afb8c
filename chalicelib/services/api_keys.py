"""API keys: create (the plaintext is returned once and never stored), revoke, look up."""

from __future__ import annotations

from dataclasses import dataclass

from chalicelib.db.connection import Database
from chalicelib.db.queries import queries
from chalicelib.domain.api_keys import generate_key, hash_key


@dataclass(frozen=True)
class CreatedKey:
    """A new key: its id (for revocation) and the plaintext (shown once)."""

    key_id: str
    name: str
    key: str


@dataclass(frozen=True)
class ApiKeyService:
    """The ``api_keys`` table behind the command line and the API's authenticator."""

    db: Database

    def create(self, name: str) -> CreatedKey:
        """Store the hash of a new random key labelled ``name``; return the plaintext once."""
        if not name.strip():
            raise ValueError("a key needs a non-empty name")
        key = generate_key()
        rows = self.db.run(queries["api_key_insert"], name=name, key_hash=hash_key(key))
        return CreatedKey(key_id=str(rows[0]["key_id"]), name=name, key=key)

    def revoke(self, key_id: str) -> bool:
        """Revoke a key; False if no active key has this id."""
        return self.db.execute(queries["api_key_revoke"], key_id=key_id) > 0

    def is_active(self, key_hash: bytes) -> bool:
        """Is there an unrevoked key with this hash? (The authenticator's cache miss.)"""
        return bool(self.db.run(queries["api_key_is_active"], key_hash=key_hash))
