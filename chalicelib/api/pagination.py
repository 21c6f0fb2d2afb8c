"""Cursor pagination shared by every list endpoint.

The cursor is opaque to clients: base64url of ``{"v": 1, "t": <sort timestamp>, "k": <id>}``,
the last item's sort key. Lists are keyset-paginated on ``(timestamp, id)``, which stays
stable while rows are inserted concurrently: a page never repeats or skips an older row.
A cursor that does not decode to that shape, or whose time lies outside the range of
instants the service accepts (a forged cursor), is a 400 INVALID_REQUEST, never a 500.

Pages fit in a response: a page also ends, with its cursor, when the next item would carry
its encoded items past :data:`ITEMS_BUDGET` (under 5 MB with the envelope: Lambda refuses
responses over 6 MB), and its rows are read a few at a time, so neither the response nor the
memory behind it follows ``limit`` times the largest row.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, TypeVar

from chalicelib.domain.pagination import DEFAULT_LIMIT, MAX_LIMIT, PageRequest
from chalicelib.domain.timefmt import in_range
from chalicelib.errors import ValidationFailed

__all__ = [
    "DEFAULT_LIMIT",
    "ITEMS_BUDGET",
    "MAX_LIMIT",
    "PageRequest",
    "encoded_size",
    "page_response",
    "parse_page",
]

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


#: Encoded bytes of a page's items: with the envelope and cursor, a list response stays
#: under 5 MB, below Lambda's 6 MB response limit.
ITEMS_BUDGET = 4 * 1024 * 1024
#: Rows the first read of a page asks for. Later reads ask for what the budget left holds
#: at the largest item seen, at most :data:`READ_GROWTH` times the previous read: the rows a
#: page holds in memory follow its byte budget, not ``limit``.
FIRST_READ = 4
READ_GROWTH = 4


def page_response(
    fetch: Callable[[PageRequest], Sequence[T]],
    page: PageRequest,
    *,
    render: Callable[[T], Any],
    ts_field: str = "created_at",
    id_field: str,
) -> dict[str, Any]:
    """Build ``{"items", "cursor"}`` for ``page`` from reads of ``fetch`` (a service's list).

    ``fetch`` is called with page requests of its own (each answering up to ``limit + 1``
    views: the extra one says there is more), continuing from the last item taken, until
    ``page.limit`` items are taken, the list ends, or the next item would carry the
    encoded items past :data:`ITEMS_BUDGET`. Then the page ends with the cursor of its last
    item (``ts_field``, ``id_field``), so a client following cursors sees every item once.
    A page holds at least one item; an item past the budget on its own is :func:`fitted`.
    """
    taken = _Taken(page.limit)
    request = replace(page, limit=min(page.limit, FIRST_READ))
    while True:
        views = fetch(request)
        for view in views[: request.limit]:
            if not taken.add(view, fitted(render(view))):
                return taken.response(ts_field, id_field)
        if len(views) <= request.limit:
            return taken.response(ts_field, id_field, more=False)
        # The extra row is the next item: when it cannot fit, the page ends without a read.
        if taken.full() or not taken.has_room(fitted(render(views[request.limit]))):
            return taken.response(ts_field, id_field)
        last = taken.last
        request = PageRequest(
            limit=taken.next_read(request.limit),
            after_ts=getattr(last, ts_field),
            after_id=str(getattr(last, id_field)),
        )


class _Taken:
    """The items a page has taken so far, with their encoded size."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.items: list[Any] = []
        self.last: Any = None
        self.used = 0
        self.largest = 1

    def has_room(self, item: Any) -> bool:
        """True when ``item`` fits in what the budget left (the first item always does)."""
        return not self.items or self.used + _size(item) <= ITEMS_BUDGET

    def add(self, view: Any, item: Any) -> bool:
        """Take ``item`` unless it would carry the page past its budget (False)."""
        size = _size(item)
        if self.items and self.used + size > ITEMS_BUDGET:
            return False
        self.items.append(item)
        self.last = view
        self.used += size
        self.largest = max(self.largest, size)
        return True

    def full(self) -> bool:
        return len(self.items) >= self.limit

    def next_read(self, previous: int) -> int:
        """Rows to read next: what the budget left holds at the largest size seen, growing
        by at most :data:`READ_GROWTH` (a run of small items may precede large ones)."""
        fits = (ITEMS_BUDGET - self.used) // self.largest
        return max(1, min(self.limit - len(self.items), fits, READ_GROWTH * previous))

    def response(self, ts_field: str, id_field: str, *, more: bool = True) -> dict[str, Any]:
        cursor = None
        if more and self.last is not None:
            cursor = encode_cursor(getattr(self.last, ts_field), str(getattr(self.last, id_field)))
        return {"items": self.items, "cursor": cursor}


#: Encoded bytes of one field that an item too large for a page leaves out.
OMITTED_FIELD = 64 * 1024


def fitted(item: Any) -> Any:
    """``item``, or, when it alone is past :data:`ITEMS_BUDGET`, a copy whose fields of more
    than :data:`OMITTED_FIELD` bytes are null and listed with their sizes in ``omitted``
    (``{"input": 5242880}``): the client reads them from the single resource."""
    if not isinstance(item, dict) or encoded_size(item) <= ITEMS_BUDGET:
        return item
    sizes = {name: encoded_size(value) for name, value in item.items()}
    omitted = {name: size for name, size in sizes.items() if size > OMITTED_FIELD}
    return {
        **{name: None if name in omitted else value for name, value in item.items()},
        "omitted": omitted,
    }


def _size(item: Any) -> int:
    return encoded_size(item) + 2  # and the ", " before the next item


def encoded_size(value: Any) -> int:
    """Bytes ``value`` takes in a response body (encoded as :func:`to_response` does)."""
    return len(json.dumps(value, default=str))
