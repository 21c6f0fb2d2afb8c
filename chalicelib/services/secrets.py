"""Secrets: sensitive values endpoints reference as ``{{secret.<name>}}``.

Values are encrypted at rest (AES-256-GCM, :mod:`chalicelib.crypto`) before any
transaction, by the :class:`~chalicelib.crypto.SecretBox` the service is given; the view
carries only the name and timestamps, never the value, and nothing here logs it. A value is
a non-empty string of at most 64 KiB (UTF-8). Unlike the other setup resources, DELETE
really deletes: history names a secret only inside snapshot text, and the ciphertext must
not outlive it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from chalicelib.crypto import SecretBox
from chalicelib.db.connection import Row
from chalicelib.errors import SecretNotFound, ValidationFailed
from chalicelib.logs import log_event
from chalicelib.services.setup import Kind, NamedValueService, Stamped

log = logging.getLogger(__name__)

MAX_SECRET_BYTES = 64 * 1024


@dataclass(frozen=True, kw_only=True)
class SecretView(Stamped):
    """A secret's metadata: name and timestamps only (the value never leaves the service)."""

    @classmethod
    def from_row(cls, row: Row) -> SecretView:
        return cls(**Stamped.stamps(row))


@dataclass(frozen=True)
class SecretService(NamedValueService[SecretView]):
    """Create, list, get, rotate and delete-unless-used secrets.

    ``box`` builds the keyring on first write: a process without a configured key can
    still list and delete secrets, and creating one is the 500 that names the missing key.

    A delete races safely with what would reference the secret: registration reads the
    secrets it names in its own transaction, and job creation inserts rows the live-job
    read ranges over, so at SERIALIZABLE one of the two retries (40001) and then sees the
    other's outcome: no live work is left referencing a deleted secret.
    """

    box: Callable[[], SecretBox]

    kind: ClassVar[Kind] = "secret"
    label: ClassVar[str] = "Secret"
    tx_prefix: ClassVar[str] = "secret"
    update_verb: ClassVar[str] = "rotate"

    def view(self, row: Row) -> SecretView:
        return SecretView.from_row(row)

    def not_found(self, name: str) -> SecretNotFound:
        return SecretNotFound(f"Secret '{name}' does not exist.")

    def stored(self, name: str, value: Any) -> bytes:
        """Check the value's size and encrypt it (pure CPU, safe to re-run)."""
        if not value:
            raise ValidationFailed("Field 'value' must be a non-empty string.")
        if len(value.encode("utf-8")) > MAX_SECRET_BYTES:
            raise ValidationFailed(f"Field 'value' must be at most {MAX_SECRET_BYTES} bytes.")
        return self.box().encrypt(name, value)

    def written(self, verb: str, name: str) -> None:
        event = {"created": "secret_created", "updated": "secret_rotated"}.get(verb)
        log_event(log, event or "secret_deleted", secret=name)
