"""SecretBox: AES-256-GCM round trip, key ids for rotation, tamper detection."""

from __future__ import annotations

import os

import pytest

from chalicelib.crypto import KEY_ID_BYTES, NONCE_BYTES, VERSION, SecretBox, key_id
from chalicelib.errors import SecretKeyError

KEY_A = bytes(range(32))
KEY_B = bytes(range(1, 33))
HEADER = 1 + KEY_ID_BYTES + NONCE_BYTES


def test_round_trip_and_format() -> None:
    box = SecretBox(KEY_A)
    blob = box.encrypt("api_key", "sk-live-ünïcode")
    assert blob[0] == VERSION
    assert blob[1 : HEADER - NONCE_BYTES] == key_id(KEY_A)
    assert b"sk-live" not in blob
    assert box.decrypt("api_key", blob) == "sk-live-ünïcode"
    assert box.decrypt("api_key", memoryview(blob)) == "sk-live-ünïcode"


def test_each_encryption_uses_a_fresh_nonce() -> None:
    box = SecretBox(KEY_A)
    assert box.encrypt("n", "same") != box.encrypt("n", "same")


def test_rotation_older_keys_still_decrypt_new_writes_use_the_current_key() -> None:
    old_blob = SecretBox(KEY_A).encrypt("n", "v")
    rotated = SecretBox(KEY_B, [KEY_A])
    assert rotated.decrypt("n", old_blob) == "v"
    assert rotated.encrypt("n", "v")[1 : 1 + KEY_ID_BYTES] == key_id(KEY_B)
    with pytest.raises(SecretKeyError, match="key id"):
        SecretBox(KEY_B).decrypt("n", old_blob)


@pytest.mark.parametrize("position", [0, 1, HEADER - 1, HEADER, -1])
def test_any_tampered_byte_is_detected(position: int) -> None:
    box = SecretBox(KEY_A)
    blob = bytearray(box.encrypt("n", "value"))
    blob[position] ^= 0x01
    with pytest.raises(SecretKeyError):
        box.decrypt("n", bytes(blob))


def test_ciphertext_is_bound_to_the_secret_name() -> None:
    box = SecretBox(KEY_A)
    with pytest.raises(SecretKeyError, match="failed authentication"):
        box.decrypt("other_name", box.encrypt("name", "value"))


def test_truncated_or_unknown_blobs_are_rejected() -> None:
    box = SecretBox(KEY_A)
    for blob in (b"", b"\x01" * HEADER, b"\x02" + os.urandom(64)):
        with pytest.raises(SecretKeyError, match="unknown format"):
            box.decrypt("n", blob)


def test_keys_must_be_32_bytes_and_encrypting_needs_a_current_key() -> None:
    with pytest.raises(SecretKeyError):
        SecretBox(b"short")
    with pytest.raises(SecretKeyError):
        SecretBox(KEY_A, [b"x" * 16])
    decrypt_only = SecretBox(None, [KEY_A])
    with pytest.raises(SecretKeyError, match="TE_SECRET_ENCRYPTION_KEY"):
        decrypt_only.encrypt("n", "v")
    assert decrypt_only.decrypt("n", SecretBox(KEY_A).encrypt("n", "v")) == "v"
