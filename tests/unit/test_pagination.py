"""Cursor encoding and page parsing (pure)."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone

import pytest

from chalicelib.api.pagination import decode_cursor, encode_cursor, page_response, parse_page
from chalicelib.domain.pagination import DEFAULT_LIMIT, MAX_LIMIT, PageRequest
from chalicelib.errors import ValidationFailed


def test_cursor_round_trip_keeps_microseconds_and_zone() -> None:
    ts = datetime(2026, 3, 15, 10, 0, 0, 123456, tzinfo=UTC)
    cursor = encode_cursor(ts, "job_abc")
    assert "=" not in cursor and "/" not in cursor and "+" not in cursor
    assert decode_cursor(cursor) == (ts, "job_abc")
    ist = timezone(timedelta(hours=5, minutes=30))
    assert decode_cursor(encode_cursor(ts.astimezone(ist), "k"))[0] == ts


def _b64(payload: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        "!!!",
        "not-base64-json",
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),
        _b64([1, 2]),
        _b64({"v": 2, "t": "2026-01-01T00:00:00+00:00", "k": "a"}),
        _b64({"v": 1, "t": "2026-01-01T00:00:00", "k": "a"}),
        _b64({"v": 1, "t": "yesterday", "k": "a"}),
        _b64({"v": 1, "t": "2026-01-01T00:00:00+00:00", "k": ""}),
        _b64({"v": 1, "t": "2026-01-01T00:00:00+00:00", "k": 5}),
        _b64({"v": 1, "k": "a"}),
    ],
)
def test_bad_cursors_are_400(cursor: str) -> None:
    with pytest.raises(ValidationFailed, match="Invalid cursor"):
        decode_cursor(cursor)


def test_parse_page_defaults_and_bounds() -> None:
    assert parse_page(None) == PageRequest(limit=DEFAULT_LIMIT)
    assert parse_page({"limit": "1"}).limit == 1
    assert parse_page({"limit": str(MAX_LIMIT)}).limit == MAX_LIMIT
    for bad in ("0", str(MAX_LIMIT + 1), "-5", "1.5", "ten", "", "9" * 20):
        with pytest.raises(ValidationFailed, match="limit"):
            parse_page({"limit": bad})
    ts = datetime(2026, 1, 1, tzinfo=UTC)
    page = parse_page({"cursor": encode_cursor(ts, "n")})
    assert (page.after_ts, page.after_id) == (ts, "n")


@dataclass(frozen=True)
class Named:
    """A view as services return them: the cursor reads its attributes."""

    name: str
    created_at: datetime


def test_page_response_sets_a_cursor_only_when_more_rows_exist() -> None:
    base = datetime(2026, 1, 1, tzinfo=UTC)
    rows = [Named(f"n{i}", base - timedelta(seconds=i)) for i in range(3)]
    page = PageRequest(limit=2)
    full = page_response(lambda _: rows, page, render=lambda r: r.name, id_field="name")
    assert full["items"] == ["n0", "n1"]
    assert decode_cursor(full["cursor"]) == (rows[1].created_at, "n1")
    last = page_response(lambda _: rows[:2], page, render=lambda r: r.name, id_field="name")
    assert last == {"items": ["n0", "n1"], "cursor": None}
    empty = page_response(lambda _: [], page, render=str, id_field="name")
    assert empty == {"items": [], "cursor": None}
