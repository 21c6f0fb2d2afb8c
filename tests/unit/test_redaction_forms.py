"""Redaction of parts of a secret and of the encodings HTML, Python and MIME write.

A message may quote part of a secret (redis-py's URL parser showed 13 of 18 characters), so
every run of six characters of a secret is redacted; a shorter secret only whole. Echoes
may be HTML-escaped (named, decimal and hex references), a ``bytes`` or ``ascii()`` repr
(``b'\\xc3\\xa9'``, ``'\\xe9'``) or base64 broken into 76-column lines as MIME writes it.
"""

from __future__ import annotations

import base64
import html

import pytest

from chalicelib.domain.redaction import MIN_RUN, redactor

SECRET = "Zq7-k9pX2mWv4sLr8T"  # 18 characters


def runs(secret: str, size: int = MIN_RUN) -> list[str]:
    return [secret[i : i + size] for i in range(len(secret) - size + 1)]


def left_runs(text: str, secret: str) -> list[str]:
    return [run for run in runs(secret) if run in text]


def test_every_six_character_run_of_a_secret_is_redacted() -> None:
    scrub = redactor([SECRET])
    for start in range(len(SECRET) - MIN_RUN + 1):
        for end in range(start + MIN_RUN, len(SECRET) + 1):
            text = f"Invalid port '{SECRET[start:end]}' in URL"
            assert left_runs(scrub.redact(text), SECRET) == [], text


def test_a_redis_url_parse_error_keeps_no_part_of_the_secret() -> None:
    message = f"Port could not be cast to integer value as '{SECRET[:13]}'"
    redacted = redactor([SECRET]).redact(message)
    assert left_runs(redacted, SECRET) == [] and "[REDACTED]" in redacted


def test_a_secret_shorter_than_a_run_is_redacted_whole_only() -> None:
    scrub = redactor(["ab1c9"])
    assert scrub.redact("x ab1c9 y") == "x [REDACTED] y"
    assert scrub.redact("ab1c and b1c9") == "ab1c and b1c9"


NON_ASCII = "pä'ss<&>\"wörd😀-tail"


@pytest.mark.parametrize(
    "form",
    [
        html.escape(NON_ASCII),
        html.escape(NON_ASCII).replace("&#x27;", "&#39;").replace("&quot;", "&#34;"),
        html.escape(NON_ASCII).replace("&#x27;", "&apos;"),
        "".join(f"&#{ord(c)};" for c in NON_ASCII),
        "".join(f"&#X{ord(c):04X};" for c in NON_ASCII),
        repr(NON_ASCII.encode()),
        str(NON_ASCII.encode()),
        ascii(NON_ASCII),
    ],
    ids=[
        "html",
        "html-decimal-quotes",
        "html-apos",
        "decimal",
        "hex",
        "bytes",
        "str-bytes",
        "ascii",
    ],
)
def test_html_escaped_and_repr_forms_are_redacted(form: str) -> None:
    redacted = redactor([NON_ASCII]).redact(f"echo: {form} end")
    assert redacted.startswith("echo: ") and "[REDACTED]" in redacted, redacted
    assert "tail" not in redacted and "w\\xc3\\xb6" not in redacted, redacted


@pytest.mark.parametrize("prefix", range(0, 80, 7))
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_mime_base64_broken_into_76_column_lines_is_redacted(prefix: int, newline: str) -> None:
    secret = "mime-" + SECRET * 3  # long enough to cross a line break
    data = b"x" * prefix + secret.encode() + b" after"
    mime = base64.encodebytes(data).decode().replace("\n", newline)
    assert "\n" in mime.strip()
    redacted = redactor([secret]).redact(mime)
    assert "[REDACTED]" in redacted
    core = base64.b64encode(data).decode()
    # No 12-character stretch of the secret's base64 survives, across lines or not.
    flat = redacted.replace("\r", "").replace("\n", "")
    middle = core[(prefix * 4) // 3 + 4 : ((prefix + len(secret)) * 4) // 3 - 4]
    assert not any(middle[i : i + 12] in flat for i in range(len(middle) - 12)), redacted


def test_runs_of_a_secret_too_long_to_spell_are_redacted_too() -> None:
    secret = "".join(f"{n:05d}-" for n in range(11_000))  # 66,000 characters
    scrub = redactor([secret])
    part = secret[30_001:30_020]
    assert left_runs(scrub.redact(f"echo {part} end"), secret) == []
    assert scrub.redact(secret) == "[REDACTED]"
