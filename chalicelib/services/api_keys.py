"""API keys: create (the plaintext is returned once and never stored), list, revoke, and
the authenticator's look-up of a presented key's scope.

The one path of key administration: the API's key routes (:mod:`chalicelib.api.keys`,
which ``te keys`` calls) and the operator's first-key bootstrap (``python -m
chalicelib.migrate --first-admin-key``) both go through :class:`ApiKeyService`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from chalicelib.db.connection import Database
from chalicelib.db.queries import queries
from chalicelib.domain.api_keys import Scope, check_key_name, generate_key, hash_key
from chalicelib.domain.pagination import PageRequest
from chalicelib.errors import ApiKeyNotFound


@dataclass(frozen=True)
class ApiKey:
    """A stored key as it may be shown: never its hash, never the key itself."""

    key_id: str
    name: str
    scope: Scope
    created_at: datetime
    revoked_at: datetime | None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ApiKey:
        return cls(
            key_id=str(row["key_id"]),
            name=str(row["name"]),
            scope=Scope(row["scope"]),
            created_at=row["created_at"],
            revoked_at=row["revoked_at"],
        )


@dataclass(frozen=True)
class CreatedKey:
    """A new key: what is stored about it, and the plaintext (shown once)."""

    api_key: ApiKey
    key: str = field(repr=False)  # never in a log line or a traceback's repr

    @property
    def key_id(self) -> str:
        return self.api_key.key_id


@dataclass(frozen=True)
class ApiKeyService:
    """The ``api_keys`` table behind the key routes, the operator's bootstrap and the API's
    authenticator."""

    db: Database

    def create(self, name: Any, scope: Scope) -> CreatedKey:
        """Store the hash of a new random key labelled ``name`` (checked here: 400 when it
        breaks the naming rules); return the plaintext once."""
        name = check_key_name(name)
        key = generate_key()
        rows = self.db.run(
            queries["api_key_insert"], name=name, key_hash=hash_key(key), scope=scope.value
        )
        return CreatedKey(ApiKey.from_row(rows[0]), key)

    def create_first_admin(self, name: str) -> CreatedKey | None:
        """An admin key, only while the database holds no active admin key (None then).

        The bootstrap of a fresh database, where no key can call ``POST /keys`` yet.
        """
        name = check_key_name(name)
        key = generate_key()
        rows = self.db.run(queries["api_key_insert_first_admin"], name=name, key_hash=hash_key(key))
        return CreatedKey(ApiKey.from_row(rows[0]), key) if rows else None

    def list(self, page: PageRequest) -> list[ApiKey]:
        """Up to ``page.limit + 1`` keys, revoked ones included, newest first."""
        rows = self.db.run(queries["api_key_list"], **page.params())
        return [ApiKey.from_row(row) for row in rows]

    def revoke(self, key_id: str) -> ApiKey:
        """Revoke a key (idempotent: a revoked key keeps its first revocation time)."""
        rows = self.db.run(queries["api_key_revoke"], key_id=key_id)
        if not rows:
            raise ApiKeyNotFound(f"API key with ID '{key_id}' does not exist.")
        return ApiKey.from_row(rows[0])

    def scope_of(self, key_hash: bytes) -> Scope | None:
        """The scope of the unrevoked key with this hash, None if there is none (the
        authenticator's cache miss)."""
        rows = self.db.run(queries["api_key_scope"], key_hash=key_hash)
        return Scope(rows[0]["scope"]) if rows else None
