"""Cursor pagination shared by every list endpoint.

The cursor is opaque to clients: base64url of ``{"v": 1, "t": <sort timestamp>, "k": <id>}``,
the last item's sort key. Lists are keyset-paginated on ``(timestamp, id)``, which stays
stable while rows are inserted concurrently: a page never repeats or skips an older row.
A cursor that does not decode to that shape, or whose time lies outside the range of
instants the service accepts (a forged cursor), is a 400 INVALID_REQUEST, never a 500.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from chalicelib.domain.pagination import DEFAULT_LIMIT, MAX_LIMIT, PageRequest
from chalicelib.domain.timefmt import in_range
from chalicelib.errors import ValidationFailed

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "PageRequest", "page_response", "parse_page"]

T = TypeVar("T")


def encode_cursor(ts: datetime, key: str) -> str:
    raw = json.dumps({"v": 1, "t": ts.isoformat(), "k": key}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


#: Ids the service generates (``job_…``, ``exec_…``, ``batch_…``): what a cursor's key may be.
_CURSOR_KEY = re.compile(r"[A-Za-z0-9_-]{1,128}")
#: Longer than any cursor this module writes.
_MAX_CURSOR = 512


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        if len(cursor) > _MAX_CURSOR:
            raise ValueError("cursor too long")
        padded = cursor + "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
        if not isinstance(data, dict) or data.get("v") != 1:
            raise ValueError("unknown cursor version")
        ts = datetime.fromisoformat(data["t"])
        key = data["k"]
        if ts.tzinfo is None or not in_range(ts):
            raise ValueError("bad cursor time")
        if not isinstance(key, str) or not _CURSOR_KEY.fullmatch(key):
            raise ValueError("bad cursor key")
        return ts, key
    except (ValueError, KeyError, TypeError, UnicodeError, binascii.Error) as exc:
        raise ValidationFailed(
            "Invalid cursor: use the 'cursor' value of a previous page."
        ) from exc


def parse_page(params: Mapping[str, str] | None) -> PageRequest:
    """Read ``limit`` (1..200, default 50) and ``cursor`` from query parameters."""
    params = params or {}
    raw_limit = params.get("limit")
    limit = DEFAULT_LIMIT
    if raw_limit is not None:
        if not raw_limit.isdigit() or len(raw_limit) > 6:
            raise ValidationFailed(f"limit must be an integer between 1 and {MAX_LIMIT}.")
        limit = int(raw_limit)
        if not 1 <= limit <= MAX_LIMIT:
            raise ValidationFailed(f"limit must be an integer between 1 and {MAX_LIMIT}.")
    cursor = params.get("cursor")
    if cursor:
        ts, key = decode_cursor(cursor)
        return PageRequest(limit=limit, after_ts=ts, after_id=key)
    return PageRequest(limit=limit)


def page_response(
    views: Sequence[T],
    page: PageRequest,
    *,
    render: Callable[[T], Any],
    ts_field: str = "created_at",
    id_field: str,
) -> dict[str, Any]:
    """Build ``{"items", "cursor"}`` from up to ``limit + 1`` views a service returned.

    Queries fetch one row more than asked: its presence says there is a next page. The
    cursor is the last item's ``(ts_field, id_field)`` attributes.
    """
    items = list(views[: page.limit])
    cursor = None
    if len(views) > page.limit and items:
        last = items[-1]
        cursor = encode_cursor(getattr(last, ts_field), str(getattr(last, id_field)))
    return {"items": [render(item) for item in items], "cursor": cursor}
