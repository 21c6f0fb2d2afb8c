"""Every way a character of a secret can be written back to us, as RE2 patterns.

:mod:`chalicelib.domain.redaction` matches a secret as one pattern per character in which
the character may appear literally or in any of these spellings: JSON escapes, percent-
encoded UTF-8, HTML character references and Python's ``repr`` escapes. Hex digits match
in either case.
"""

from __future__ import annotations

import json
import re

_HTML_NAMES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;"}
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


def char_alternatives(char: str) -> list[str]:
    """Every spelling of ``char``: literal, JSON escapes, percent-encoded UTF-8, HTML
    character references and Python's ``repr`` escapes (of a ``str`` or of ``bytes``)."""
    return [
        re.escape(char),
        *_json_spellings(char),
        *_url_spellings(char),
        *_html_spellings(char),
        *_repr_spellings(char),
    ]


def _json_spellings(char: str) -> list[str]:
    """``\\u00e9`` (beyond the BMP a surrogate pair, or ``\\U0001f600`` as Python writes it)
    and the short escapes (``\\n``)."""
    if ord(char) <= 0xFFFF:
        spellings = ["\\\\u" + "".join(_hex_digit(d) for d in f"{ord(char):04x}")]
    else:
        spellings = [
            _json_surrogates(char),
            "\\\\U" + "".join(_hex_digit(d) for d in f"{ord(char):08x}"),
        ]
    if char in _JSON_SHORT:
        spellings.append(re.escape(_JSON_SHORT[char]))
    return spellings


def _url_spellings(char: str) -> list[str]:
    """Percent-encoded UTF-8, and ``+`` for a space (forms)."""
    percent = "".join("%" + "".join(_hex_digit(d) for d in f"{b:02x}") for b in char.encode())
    return [percent, "\\+"] if char == " " else [percent]


def _repr_spellings(char: str) -> list[str]:
    """Python's escapes: ``b'\\xc3\\xa9'`` for bytes that do not print, ``'\\xe4'`` as
    ``ascii()`` writes a ``str``, and ``\\'``."""
    spellings = []
    if not char.isascii() or not char.isprintable():  # b'\xc3\xa9' as bytes print
        spellings.append("".join(_escaped_byte(b) for b in char.encode()))
        if ord(char) < 0x100:  # '\xe4' as ascii() prints a str
            spellings.append(_escaped_byte(ord(char)))
    if char == "'":
        spellings.append("\\\\'")
    return spellings


def _html_spellings(char: str) -> list[str]:
    """``&amp;``-style names, and decimal and hex character references (``&#39;``,
    ``&#x27;``: any case, leading zeros), as HTML escapers write them."""
    spellings = [
        f"&#0*{ord(char)};",
        "&#[xX]0*" + "".join(_hex_digit(d) for d in f"{ord(char):x}") + ";",
    ]
    if char in _HTML_NAMES:
        spellings.append(_HTML_NAMES[char])
    return spellings


def _escaped_byte(byte: int) -> str:
    return "\\\\x" + "".join(_hex_digit(d) for d in f"{byte:02x}")


def _json_surrogates(char: str) -> str:
    encoded = json.dumps(char)[1:-1]  # \\ud83d\\ude00
    return "".join(
        "\\\\u" + "".join(_hex_digit(d) for d in part.lower())
        for part in encoded.split("\\u")
        if part
    )


def _hex_digit(digit: str) -> str:
    return f"[{digit}{digit.upper()}]" if digit.isalpha() else digit
