"""Redaction of secret values from what a delivery brings back, in every encoding.

A target may echo what it received, and client libraries quote what they sent: a secret can
come back raw, JSON-escaped (``pw\\"with\\"quotes``, ``\\u00e4``), percent-encoded in
either case (``p%C3%A4ss``, ``p%c3%a4ss``, ``+`` for a space), base64-encoded (alone or
inside a larger base64 text such as a ``Basic`` credential) or hex-encoded in either case
(``70c3a4...``, ``70C3A4...``). :class:`Redactor` replaces every such form with
``[REDACTED]``, and :meth:`Redactor.cut` shortens text only after redacting, removing a
form that the cut would leave half-visible at the end.

How: raw, JSON-escaped and percent-encoded forms are matched by one regular expression per
secret in which every character may appear literally or in any of its escaped spellings
(mixtures included). The expression runs on RE2: spellings overlap (a backslash is one
backslash or two), and on a backtracking engine a secret of backslashes echoed back doubled
took exponential time; on RE2 matching is linear in the text. The encodings of the
secret's UTF-8 bytes are one list, :func:`byte_forms`: base64 matched by the encoded
characters that depend on the secret alone, for each of the three alignments the secret can
have inside a base64 text, in the standard and URL-safe alphabets; and hex in lower and
upper case (byte-aligned anywhere in a larger hex text, so one spelling each). A signing
key, which is bytes and not text, gets the same list
(:meth:`chalicelib.domain.signing.SigningKeys.redaction_forms`).
"""

from __future__ import annotations

import base64
import functools
import json
import re
from collections.abc import Iterable
from typing import Any

REDACTED = "[REDACTED]"
#: Base64 cores shorter than this are not redacted (they would match ordinary text).
MIN_BASE64_CORE = 6
#: Secrets longer than this are matched by their canonical spellings only (a per-character
#: pattern for a 64 KiB value would take long to compile).
MAX_SPELLED = 1024
_JSON_SHORT = {
    '"': '\\"',
    "\\": "\\\\",
    "/": "\\/",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


class Redactor:
    """Finds and replaces the secrets of one delivery; build with :func:`redactor`."""

    def __init__(self, secrets: tuple[str, ...]) -> None:
        self._pattern: Any = _pattern(secrets)
        self._plain_forms = sorted(
            {form for s in secrets for form in _plain_forms(s) if form}, key=len, reverse=True
        )

    def redact(self, text: str) -> str:
        if self._pattern is None:
            return text
        return self._pattern.sub(REDACTED, text)

    def cut(self, text: str, limit: int) -> str:
        """``text`` redacted, then cut to ``limit`` characters with no half form at the end
        (a marker the cut would split is kept whole)."""
        text = self.redact(text)
        if len(text) <= limit:
            return text
        marker = text.find(REDACTED, max(0, limit - len(REDACTED) + 1), limit + len(REDACTED) - 1)
        if marker != -1:  # the cut falls inside a marker: keep the marker whole
            return text[: marker + len(REDACTED)]
        cut = text[:limit]
        for form in self._plain_forms:
            cut = _without_partial_tail(cut, form)
        return cut


def redactor(secrets: Iterable[str]) -> Redactor:
    """The (cached) redactor for a set of secret values."""
    return _cached(tuple(sorted({s for s in secrets if s})))


@functools.lru_cache(maxsize=256)
def _cached(secrets: tuple[str, ...]) -> Redactor:
    return Redactor(secrets)


def _char_alternatives(char: str) -> list[str]:
    """Every spelling of ``char``: literal, JSON escapes, percent-encoded UTF-8."""
    spellings = [re.escape(char)]
    if ord(char) <= 0xFFFF:
        spellings.append("\\\\u" + "".join(_hex_digit(d) for d in f"{ord(char):04x}"))
    else:
        spellings.append(_json_surrogates(char))
    if char in _JSON_SHORT:
        spellings.append(re.escape(_JSON_SHORT[char]))
    percent = "".join("%" + "".join(_hex_digit(d) for d in f"{b:02x}") for b in char.encode())
    spellings.append(percent)
    if char == " ":
        spellings.append("\\+")
    return spellings


def _json_surrogates(char: str) -> str:
    encoded = json.dumps(char)[1:-1]  # \\ud83d\\ude00
    return "".join(
        "\\\\u" + "".join(_hex_digit(d) for d in part.lower())
        for part in encoded.split("\\u")
        if part
    )


def _hex_digit(digit: str) -> str:
    return f"[{digit}{digit.upper()}]" if digit.isalpha() else digit


def _pattern(secrets: tuple[str, ...]) -> Any:
    """One alternation over every secret's spellings and base64 cores, longest first.

    Each secret is a fixed sequence of per-character alternatives without quantifiers.
    """
    parts: list[tuple[int, str]] = []
    for secret in secrets:
        if len(secret) <= MAX_SPELLED:
            spelled = "".join("(?:" + "|".join(_char_alternatives(c)) + ")" for c in secret)
            parts.append((len(secret), spelled))
        else:
            parts.extend((len(form), re.escape(form)) for form in _plain_forms(secret))
        parts.extend((len(form), re.escape(form)) for form in byte_forms(secret.encode()))
    if not parts:
        return None
    parts.sort(key=lambda part: part[0], reverse=True)
    import re2  # linear time whatever the secret and the text (see the module docstring)

    options = re2.Options()
    options.log_errors = False
    options.max_mem = 64 << 20  # a 1,024-character secret's spellings need a few MiB
    return re2.compile("|".join(p for _, p in parts), options)


def byte_forms(data: bytes) -> set[str]:
    """Every encoding of ``data`` a target or library could echo back as text: the base64
    cores at each alignment (both alphabets) and the hex in lower and upper case."""
    return _base64_cores(data) | {data.hex(), data.hex().upper()}


def _base64_cores(data: bytes) -> set[str]:
    """The base64 characters fixed by ``data`` alone, at each of 3 alignments."""
    cores = set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + data + b"\0\0").decode()
        first = -(-8 * offset // 6)  # first character whose 6 bits are all the secret's
        last = 8 * (offset + len(data)) // 6  # one past the last such character
        core = encoded[first:last]
        if len(core) >= MIN_BASE64_CORE:
            cores.add(core)
            cores.add(core.replace("+", "-").replace("/", "_"))
    return cores


def _plain_forms(secret: str) -> list[str]:
    """Canonical spellings, for spotting a form that a cut leaves half-visible."""
    from urllib.parse import quote, quote_plus

    forms = [secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]]
    for encoded in (quote(secret, safe=""), quote_plus(secret, safe="")):
        forms += [encoded, re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), encoded)]
    return forms + sorted(byte_forms(secret.encode()))


def _without_partial_tail(text: str, form: str, minimum: int = 3) -> str:
    """``text`` with a trailing prefix of ``form`` (``minimum`` chars or more) redacted."""
    if len(form) <= minimum:
        return text
    start = max(0, len(text) - len(form) + 1)
    position = text.find(form[:minimum], start)
    while position != -1:
        if form.startswith(text[position:]):
            return text[:position] + REDACTED
        position = text.find(form[:minimum], position + 1)
    return text
