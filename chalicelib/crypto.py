"""Secret encryption at rest: AES-256-GCM with a key id stored beside each ciphertext.

Stored format (``secrets.encrypted_value``)::

    0x01 | key id (4 bytes) | nonce (12 bytes) | ciphertext + 16-byte tag

The key id is the first 4 bytes of SHA-256(key), so decryption picks the right key among
the current one (``TE_SECRET_ENCRYPTION_KEY``) and older ones still accepted
(``TE_SECRET_DECRYPTION_KEYS``): rotating the key never makes stored secrets unreadable.
The secret's name is the associated data, so a ciphertext copied to another row fails
authentication instead of decrypting to the wrong secret. Every decrypted value is
remembered in :data:`chalicelib.domain.redaction.LIVE_SECRETS`, so the process's log lines
(every logger's) and its resolvers never see it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable

from chalicelib.domain.redaction import LIVE_SECRETS, remember_secret
from chalicelib.errors import SecretKeyError
from chalicelib.logs import SECRET_FILTER

VERSION = 1
NONCE_BYTES = 12
KEY_ID_BYTES = 4


def key_id(key: bytes) -> bytes:
    return hashlib.sha256(key).digest()[:KEY_ID_BYTES]


class SecretBox:
    """Encrypts with the current key; decrypts with any known key."""

    def __init__(self, current: bytes | None, older: Iterable[bytes] = ()) -> None:
        keys = ([current] if current else []) + list(older)
        for key in keys:
            if len(key) != 32:
                raise SecretKeyError("secret encryption keys must be 32 bytes")
        self._current = current
        self._by_id = {key_id(k): k for k in reversed(keys)}

    def encrypt(self, name: str, plaintext: str) -> bytes:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        if self._current is None:
            raise SecretKeyError("TE_SECRET_ENCRYPTION_KEY is not set: cannot encrypt secrets")
        nonce = os.urandom(NONCE_BYTES)
        sealed = AESGCM(self._current).encrypt(nonce, plaintext.encode("utf-8"), name.encode())
        return bytes([VERSION]) + key_id(self._current) + nonce + sealed

    def decrypt(self, name: str, blob: bytes) -> str:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        blob = bytes(blob)
        header = 1 + KEY_ID_BYTES + NONCE_BYTES
        if len(blob) < header + 16 or blob[0] != VERSION:
            raise SecretKeyError(f"secret {name!r}: stored value has an unknown format")
        kid = blob[1 : 1 + KEY_ID_BYTES]
        key = self._by_id.get(kid)
        if key is None:
            raise SecretKeyError(
                f"secret {name!r} was encrypted with key id {kid.hex()}, which is neither "
                "TE_SECRET_ENCRYPTION_KEY nor in TE_SECRET_DECRYPTION_KEYS"
            )
        nonce = blob[1 + KEY_ID_BYTES : header]
        try:
            plaintext = AESGCM(key).decrypt(nonce, blob[header:], name.encode())
        except InvalidTag as exc:
            raise SecretKeyError(
                f"secret {name!r} failed authentication (tampered or wrong key)"
            ) from exc
        value = plaintext.decode("utf-8")
        remember_secret(value)  # from now on, log lines and resolvers never see it
        SECRET_FILTER.use(LIVE_SECRETS.scrubber)
        return value
