"""Secrets: sensitive values endpoints reference as ``{{secret.<name>}}``.

Values are encrypted at rest (AES-256-GCM, :mod:`chalicelib.crypto`) before any
transaction, by the :class:`~chalicelib.crypto.SecretBox` the service is given; the view
carries only the name and timestamps, never the value, and nothing here logs it. A value is
a non-empty string of at most 64 KiB (UTF-8). Unlike the other catalogue resources, DELETE
really deletes: history names a secret only inside snapshot text, and the ciphertext must
not outlive it.

Signing secrets (``spec.signing_secret`` of an endpoint, :mod:`chalicelib.domain.signing`):
a rotation to a ``whsec_`` value keeps the value it replaced (encrypted) and when, for the
worker's rotation window; a rotation that would give an endpoint or live job that signs with
the secret a value that is not a signing key is refused (422 INVALID_SIGNING_SECRET).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from chalicelib.crypto import SecretBox
from chalicelib.db.connection import Row, Transaction
from chalicelib.db.queries import queries
from chalicelib.domain.signing import KEY_FORM, MalformedSigningSecret, parse_secret
from chalicelib.errors import (
    InvalidSigningSecret,
    SecretKeyError,
    SecretNotFound,
    ValidationFailed,
)
from chalicelib.logs import log_event
from chalicelib.services.catalogue import (
    DEPENDENTS_SHOWN,
    Kind,
    NamedValueService,
    Stamped,
    name_list,
)

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

    def replace(self, name: str, value: Any) -> SecretView:
        """Rotate a secret's value (404 if there is none), keeping a replaced signing key."""
        stored = self.stored(name, value)
        problem = signing_problem(value)
        row = self._run(lambda tx: _rotate(tx, name, stored, problem), self.update_verb)
        if row is None:
            raise self.not_found(name)
        self.written("updated", name)
        return self.view(row)

    def written(self, verb: str, name: str) -> None:
        event = {"created": "secret_created", "updated": "secret_rotated"}.get(verb)
        log_event(log, event or "secret_deleted", secret=name)


def signing_problem(value: str) -> str | None:
    """Why ``value`` cannot be a signing key (one message whatever is wrong, never quoting
    or describing the value), or None if it can."""
    try:
        parse_secret(value)
    except MalformedSigningSecret as exc:
        return str(exc)
    return None


def unusable_signing_secret(name: str) -> InvalidSigningSecret:
    """The 422 for a ``spec.signing_secret`` that cannot sign: one message whether the
    secret is missing or its value is not a key, of whatever prefix or length (an endpoint's
    author may name any secret; the answer must not describe its value)."""
    return InvalidSigningSecret(
        f"Secret '{name}' cannot be used as a signing secret: it must exist and hold {KEY_FORM}."
    )


def _rotate(tx: Transaction, name: str, stored: bytes, problem: str | None) -> Row | None:
    if problem is not None:
        signers = tx.run(queries["catalogue_secret_signers"], name=name, limit=DEPENDENTS_SHOWN + 1)
        if signers:
            users = name_list([f"{r['kind']} {r['ref']}" for r in signers])
            raise InvalidSigningSecret(
                f"Secret '{name}' signs the deliveries of {users}: its new value must be "
                f"{KEY_FORM}."
            )
    return tx.one(
        queries["catalogue_secret_update"], name=name, value=stored, keep_previous=problem is None
    )


def check_signing_secret(tx: Transaction, name: str, box: Callable[[], SecretBox] | None) -> None:
    """An endpoint's ``signing_secret`` must exist and hold a ``whsec_`` key (422 otherwise,
    the same answer for both: :func:`unusable_signing_secret`).

    The value is decrypted here only to check its form. Without a key that can decrypt it
    (``box`` None or failing), the form is left to the worker, which then fails the
    delivery with a message naming the secret, never its value.
    """
    row = tx.one(queries["catalogue_secret_ciphertext"], name=name)
    if row is None:
        raise unusable_signing_secret(name)
    if box is None:
        return
    try:
        value = box().decrypt(name, row["encrypted_value"])
    except SecretKeyError:
        return
    if signing_problem(value) is not None:
        raise unusable_signing_secret(name)
