"""Redaction finds a secret in every encoding and never leaves half of one after a cut."""

from __future__ import annotations

import base64
import json
import re
from urllib.parse import quote, quote_plus

import pytest

from chalicelib.domain.delivery import DeliveryOutcome, failed, succeeded
from chalicelib.domain.redaction import REDACTED, redactor

SECRET = 'pä"ss\\wörd with "quotes" & 😀/x'


def encodings(secret: str) -> list[str]:
    percent = quote(secret, safe="")
    return [
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        re.sub(r"\\u([0-9a-f]{4})", lambda m: "\\u" + m.group(1).upper(), json.dumps(secret)),
        percent,
        percent.lower(),
        quote_plus(secret, safe=""),
        quote(secret),  # "/" left as is
        base64.b64encode(secret.encode()).decode(),
        base64.urlsafe_b64encode(secret.encode()).decode(),
    ]


@pytest.mark.parametrize("form", encodings(SECRET))
def test_every_encoding_is_redacted(form: str) -> None:
    text = redactor([SECRET]).redact(f"before {form} after")
    assert REDACTED in text
    assert text.startswith("before ") and text.endswith(" after")
    for piece in ("wörd", "w%C3%B6rd", "w%c3%b6rd", "w\\u00f6rd"):
        assert piece not in text


@pytest.mark.parametrize("prefix", [b"", b"u:", b"us:", b"user:"])
def test_base64_inside_a_larger_text_is_redacted_at_every_alignment(prefix: bytes) -> None:
    encoded = base64.b64encode(prefix + SECRET.encode() + b"!").decode()
    text = redactor([SECRET]).redact(f"Authorization: Basic {encoded}")
    assert REDACTED in text
    core = base64.b64encode(SECRET.encode()).decode()[4:-4]
    assert core not in text


def test_a_cut_never_leaves_the_start_of_a_secret() -> None:
    scrub = redactor(["sk-live-0123456789abcdef"])
    for cut_at in range(20, 60):
        text = "x" * 30 + quote("sk-live-0123456789abcdef") + " tail"
        cut = scrub.cut(text, cut_at)
        assert "sk-l" not in cut and "sk%2D" not in cut, (cut_at, cut)


def test_cut_after_redaction_keeps_the_marker_whole() -> None:
    text = redactor(["topsecret"]).cut("a" * 8 + "topsecret" + "b" * 50, 10)
    assert text == "a" * 8 + REDACTED


def test_outcomes_are_bounded_even_without_secrets() -> None:
    big = failed("HTTP_ERROR", "m" * 10_000)  # type: ignore[arg-type]
    bounded = big.redacted([])
    assert bounded.error is not None and len(bounded.error["message"]) == 400
    body = succeeded({"status_code": 200, "body": "b" * 10_000}).redacted(["x-never"])
    assert body.output is not None and len(body.output["body"]) == 4096


def test_nested_fields_are_redacted_and_other_values_kept() -> None:
    outcome = DeliveryOutcome(
        ok=True, output={"status_code": 200, "body": "k=SECRETVALUE", "list": ["SECRETVALUE", 3]}
    )
    assert outcome.redacted(["SECRETVALUE"]).output == {
        "status_code": 200,
        "body": f"k={REDACTED}",
        "list": [REDACTED, 3],
    }


def test_a_long_secret_is_matched_by_its_canonical_spellings() -> None:
    secret = "s3cr3t-" * 400  # 2,800 characters: no per-character pattern
    scrub = redactor([secret])
    for form in (secret, quote(secret, safe=""), json.dumps(secret)[1:-1]):
        assert scrub.redact(f"<{form}>") == f"<{REDACTED}>"


def test_overlapping_spellings_do_not_backtrack() -> None:
    """A backslash is spelled with one or two backslashes: on a backtracking engine this
    secret echoed back doubled took exponential time (24 backslashes: 11 s)."""
    secret = "\\" * 40 + "X"
    text = redactor([secret]).redact("\\" * 80 + "Y")
    # Not the secret, but runs of six of its characters: those are redacted too.
    assert text.endswith("Y") and "\\" * 6 not in text
    assert redactor([secret]).redact(json.dumps(secret)) == f'"{REDACTED}"'
