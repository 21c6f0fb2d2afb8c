"""Ordering keys as the API reads them: the listed state and a page's cursor.

``GET /endpoints/{name}/ordering-keys`` lists one state, ``blocked`` (a key waiting on its
failed head: the endpoint's ``ordering.on_failure`` is ``block``), by key. Its cursor is
opaque to clients: base64url of ``{"v": 1, "k": <the last key>}`` (keys are any string of
1 to 200 characters, so not the shape of the other lists' cursors); anything else is a 400.
"""

from __future__ import annotations

import base64
import binascii
import json

from chalicelib.domain.jobs import MAX_ORDERING_KEY_LENGTH
from chalicelib.errors import ValidationFailed

#: The states ``GET /endpoints/{name}/ordering-keys`` lists.
ORDERING_KEY_STATES = ("blocked",)
#: Longer than any cursor :func:`encode_key_cursor` writes.
_MAX_CURSOR = 4 * MAX_ORDERING_KEY_LENGTH * 4


def parse_ordering_key_state(value: str | None) -> str:
    """``state``: ``blocked`` (also when absent); 400 naming it otherwise."""
    if value is None or value in ORDERING_KEY_STATES:
        return "blocked"
    raise ValidationFailed(
        f"state must be one of: {', '.join(ORDERING_KEY_STATES)} (got '{value[:50]}')."
    )


def encode_key_cursor(key: str) -> str:
    raw = json.dumps({"v": 1, "k": key}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_key_cursor(cursor: str) -> str:
    """The key a cursor continues after; 400 for anything :func:`encode_key_cursor` did not
    write."""
    try:
        if len(cursor) > _MAX_CURSOR:
            raise ValueError("cursor too long")
        padded = cursor + "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
        key = data["k"] if isinstance(data, dict) and data.get("v") == 1 else None
        if not isinstance(key, str) or not 1 <= len(key) <= MAX_ORDERING_KEY_LENGTH:
            raise ValueError("bad cursor key")
        return key
    except (ValueError, KeyError, TypeError, UnicodeError, binascii.Error) as exc:
        raise ValidationFailed(
            "Invalid cursor: use the 'cursor' value of a previous page."
        ) from exc
