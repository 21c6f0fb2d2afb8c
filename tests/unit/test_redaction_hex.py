"""A secret echoed hex-encoded (lower or upper case) is redacted like its other encodings,
the ``whsec_`` signing values and their decoded keys included (hostile-input review, LOW 1).
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

import pytest

from chalicelib.domain import signing
from chalicelib.domain.delivery import succeeded
from chalicelib.domain.redaction import REDACTED, redactor

SECRET = 'pä"ss wörd 😀/x'
KEY = bytes(range(100, 132))
SIGNING_VALUE = "whsec_" + base64.b64encode(KEY).decode()
NOW = datetime(2026, 3, 15, tzinfo=UTC)


def hexes(data: bytes) -> list[str]:
    return [data.hex(), data.hex().upper()]


@pytest.mark.parametrize("upper", [False, True], ids=["lower", "upper"])
def test_the_hex_of_a_secret_is_redacted_alone_and_inside_a_larger_hex_text(upper: bool) -> None:
    def spelled(data: bytes) -> str:
        return data.hex().upper() if upper else data.hex()

    scrub = redactor([SECRET])
    assert scrub.redact(f"echo: {spelled(SECRET.encode())}!") == f"echo: {REDACTED}!"
    larger = spelled(b"user:" + SECRET.encode() + b"\n")
    assert scrub.redact(larger) == spelled(b"user:") + REDACTED + spelled(b"\n")


def test_a_cut_does_not_leave_the_start_of_a_hex_form() -> None:
    scrub = redactor([SECRET])
    form = SECRET.encode().hex()
    for limit in range(12, 12 + len(form)):
        cut = scrub.cut("x" * 10 + form + " tail", limit)
        assert form[:6] not in cut, (limit, cut)


def forms_of_a_signing_secret(value: str, key: bytes) -> list[str]:
    """The hex of the whsec_ value (padded or not, either case) and of the decoded key."""
    unpadded = value.rstrip("=")
    return [*hexes(value.encode()), *hexes(unpadded.encode()), *hexes(key)]


@pytest.mark.parametrize(
    "form",
    forms_of_a_signing_secret(SIGNING_VALUE, KEY),
    ids=[f"{what}-{case}" for what in ("value", "unpadded", "key") for case in ("lower", "upper")],
)
def test_the_hex_of_a_whsec_value_and_of_its_key_is_redacted(form: str) -> None:
    keys = signing.signing_keys(SIGNING_VALUE, None, None, now=NOW, window=timedelta(days=1))
    outcome = succeeded({"status_code": 200, "body": f"you sent {form} ok"})
    body = outcome.redacted(keys.redaction_forms()).output
    assert body is not None
    assert body["body"].startswith("you sent ") and body["body"].endswith(" ok")
    # What is left of the form is at most the hex of the public prefix "whsec_".
    left = body["body"].removeprefix("you sent ").removesuffix(" ok")
    assert left.replace(REDACTED, "").lower() in ("", b"whsec_".hex()), body


@pytest.mark.parametrize("prefix", [b"", b"a", b"ab"], ids=["aligned", "offset1", "offset2"])
def test_the_decoded_key_is_found_in_base64_at_every_alignment(prefix: bytes) -> None:
    """The key's bytes get the redactor's byte encodings as a secret's UTF-8 bytes do."""
    keys = signing.signing_keys(SIGNING_VALUE, None, None, now=NOW, window=timedelta(days=1))
    encoded = base64.b64encode(prefix + KEY + b"!").decode()
    middle = encoded[4:-4]  # characters that depend on the key's bytes alone
    redacted = redactor(keys.redaction_forms()).redact(encoded)
    assert REDACTED in redacted and middle[:12] not in redacted, redacted
