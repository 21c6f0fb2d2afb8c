"""Signed deliveries, following the Standard Webhooks specification (pure, no I/O).

An endpoint may name a signing secret (``spec.signing_secret``: the name of a secret whose
value is ``whsec_`` + the base64 of a 24-64 byte key). Its deliveries then carry:

* ``webhook-id``: the execution id, the same on every attempt (receivers deduplicate on it);
* ``webhook-timestamp``: the send time, integer seconds since the epoch;
* ``webhook-signature``: ``v1,`` + base64(HMAC-SHA256(key, "<id>.<timestamp>.<body>")),
  one per key, space-separated: during a rotation window the new key's signature and the
  previous key's are both sent, so a receiver holding either verifies.

HTTP sends them as headers over the request body, Kafka as record headers over the record
value, Redis Streams as entry fields over :func:`stream_payload` of the entry's other fields.

The key never leaves this module except as HMAC input: a signature is a one-way function of
it. :class:`SigningKeys` hides the keys from ``repr``, and :meth:`SigningKeys.redaction_forms`
lists every spelling of the secret (the ``whsec_`` value, the key's base64 in both alphabets
with and without padding, and the redactor's encodings of the key's bytes: base64 at every
alignment, hex in both cases) for the worker's redactor, which adds the encodings of each
of these texts (the hex of the ``whsec_`` value among them). Errors never describe the
value, not even what is wrong with it (:class:`MalformedSigningSecret`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from chalicelib.domain.names import CATALOGUE_NAME, MAX_NAME_LENGTH
from chalicelib.domain.redaction import byte_forms
from chalicelib.errors import ValidationFailed

PREFIX = "whsec_"
#: Key sizes the Standard Webhooks specification recommends (24 to 64 bytes).
MIN_KEY_BYTES = 24
MAX_KEY_BYTES = 64
ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"
HEADERS = (ID_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER)
#: Stream entry fields the worker writes itself; the signed stream payload leaves them out.
STREAM_OWN_FIELDS = frozenset({"execution_id", "attempt", *HEADERS})
_BASE64 = re.compile(r"^[A-Za-z0-9+/]+={0,2}$")


#: What a signing secret's value must be; the one description every refusal gives.
KEY_FORM = f"a Standard Webhooks key ({PREFIX} + base64 of {MIN_KEY_BYTES}-{MAX_KEY_BYTES} bytes)"


class MalformedSigningSecret(ValueError):
    """A signing secret's value is not ``whsec_<base64 key>``. The message is the same
    whatever is wrong: it says nothing of the value (its prefix, encoding or length), since
    whoever reads it (an endpoint's author, an attempt's reader) may not know the value."""

    def __init__(self) -> None:
        super().__init__(f"its value is not {KEY_FORM}")


def check_signing_secret_field(where: str, value: Any) -> None:
    """``spec.signing_secret``: a secret's name (400 otherwise; existence is the service's)."""
    if (
        not isinstance(value, str)
        or len(value) > MAX_NAME_LENGTH
        or not CATALOGUE_NAME.match(value)
    ):
        raise ValidationFailed(f"Field '{where}' must be the name of a secret.")


def signing_secret_of(spec: Mapping[str, Any] | None) -> str | None:
    """The name of the secret an endpoint spec signs with, or None."""
    name = (spec or {}).get("signing_secret")
    return name if isinstance(name, str) and name else None


def parse_secret(value: str) -> bytes:
    """The key of a ``whsec_<base64>`` value (:class:`MalformedSigningSecret` otherwise)."""
    if not value.startswith(PREFIX):
        raise MalformedSigningSecret()
    encoded = value[len(PREFIX) :]
    if not _BASE64.fullmatch(encoded):
        raise MalformedSigningSecret()
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise MalformedSigningSecret() from None
    if not MIN_KEY_BYTES <= len(key) <= MAX_KEY_BYTES:
        raise MalformedSigningSecret()
    return key


@dataclass(frozen=True)
class SigningKeys:
    """The keys one delivery signs with: the current one first, then a previous one."""

    keys: tuple[bytes, ...] = field(repr=False)

    def __repr__(self) -> str:
        return f"SigningKeys(<{len(self.keys)} key(s) hidden>)"

    def headers(self, msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
        """The three Standard Webhooks headers for ``body`` sent at ``timestamp``."""
        signatures = " ".join(sign(key, msg_id, timestamp, body) for key in self.keys)
        return {ID_HEADER: msg_id, TIMESTAMP_HEADER: str(timestamp), SIGNATURE_HEADER: signatures}

    def redaction_forms(self) -> tuple[str, ...]:
        """Every spelling of the keys a target or library could echo back."""
        forms: list[str] = []
        for key in self.keys:
            standard = base64.b64encode(key).decode()
            urlsafe = base64.urlsafe_b64encode(key).decode()
            unpadded = standard.rstrip("=")  # the verifier accepts a value without padding
            forms += [PREFIX + standard, PREFIX + unpadded, unpadded, urlsafe.rstrip("=")]
            forms += sorted(byte_forms(key))  # the key's own bytes: base64 cores and hex
        return tuple(forms)


def sign(key: bytes, msg_id: str, timestamp: int, body: bytes) -> str:
    """``v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">``."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def signing_keys(
    current: str,
    previous: str | None,
    rotated_at: datetime | None,
    *,
    now: datetime,
    window: timedelta,
) -> SigningKeys:
    """The keys to sign with: the current value's (must parse), plus the previous value's
    while ``now`` is within ``window`` of the rotation. A previous value that does not
    parse, or equals the current one, adds nothing."""
    key = parse_secret(current)
    keys = [key]
    if previous is not None and rotated_at is not None and now < rotated_at + window:
        try:
            old = parse_secret(previous)
        except MalformedSigningSecret:
            old = key
        if old != key:
            keys.append(old)
    return SigningKeys(tuple(keys))


def stream_payload(fields: Mapping[str, str]) -> bytes:
    """What a Redis Stream entry's signature covers: its fields (but the worker's own:
    :data:`STREAM_OWN_FIELDS`) as compact JSON with sorted keys, which a receiver rebuilds
    with ``json.dumps(fields, sort_keys=True, separators=(",", ":"))``."""
    own = {k: v for k, v in fields.items() if k not in STREAM_OWN_FIELDS}
    return json.dumps(own, sort_keys=True, separators=(",", ":")).encode()


def webhook_headers(
    keys: SigningKeys | None, msg_id: str, body: bytes, now: Callable[[], float] = time.time
) -> dict[str, str]:
    """The signature headers for ``body`` sent now, or none for an unsigned endpoint."""
    if keys is None:
        return {}
    return keys.headers(msg_id, int(now()), body)
