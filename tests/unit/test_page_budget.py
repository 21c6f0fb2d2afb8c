"""A list page's byte budget and the reads behind it (pure: a list stands in for a table).

Every list route builds its page with :func:`page_response` from reads of the service's
list; these tests drive it with a keyset-paginated list of items of chosen sizes.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from chalicelib.api.pagination import (
    ITEMS_BUDGET,
    decode_cursor,
    encode_cursor,
    encoded_size,
    page_response,
)
from chalicelib.domain.pagination import MAX_LIMIT, PageRequest

MB = 1_000_000


@dataclass(frozen=True)
class Row:
    """A view as services return them: the cursor reads its attributes."""

    item_id: str
    created_at: datetime
    size: int


class Table:
    """Rows newest first, read as the named list queries do: after the keyset, ``limit + 1``."""

    def __init__(self, sizes: list[int]) -> None:
        base = datetime(2030, 1, 1, tzinfo=UTC)
        self.rows = [Row(f"r{i:04d}", base - timedelta(seconds=i), s) for i, s in enumerate(sizes)]
        self.rows_read = 0
        self.reads = 0

    def fetch(self, page: PageRequest) -> list[Row]:
        start = 0
        if page.after_id is not None:
            start = 1 + next(i for i, r in enumerate(self.rows) if r.item_id == page.after_id)
        found = self.rows[start : start + page.limit + 1]
        self.rows_read += len(found)
        self.reads += 1
        return found


def render(row: Row) -> dict[str, Any]:
    return {"item_id": row.item_id, "input": "x" * row.size}


def page(table: Table, limit: int, cursor: str | None = None) -> dict[str, Any]:
    request = PageRequest(limit=limit)
    if cursor is not None:
        ts, key = decode_cursor(cursor)
        request = PageRequest(limit=limit, after_ts=ts, after_id=key)
    return page_response(table.fetch, request, render=render, id_field="item_id")


def walk(table: Table, limit: int) -> list[dict[str, Any]]:
    pages, cursor = [], None
    while True:
        body = page(table, limit, cursor)
        pages.append(body)
        cursor = body["cursor"]
        if cursor is None:
            return pages


def test_a_page_of_large_items_ends_at_the_budget_with_its_last_items_cursor() -> None:
    table = Table([MB] * 60)
    body = page(table, MAX_LIMIT)
    assert len(body["items"]) == ITEMS_BUDGET // (MB + 30)
    assert encoded_size(body) < 5_000_000
    last = table.rows[len(body["items"]) - 1]
    assert body["cursor"] == encode_cursor(last.created_at, last.item_id)


def test_the_rows_read_follow_the_budget_not_the_limit() -> None:
    """60 rows of 1 MB and limit=200: the reads fetch what one page holds, plus one."""
    table = Table([MB] * 60)
    body = page(table, MAX_LIMIT)
    assert table.rows_read <= len(body["items"]) + 1


def test_small_items_fill_the_limit_in_a_few_reads() -> None:
    table = Table([100] * (MAX_LIMIT + 1))
    body = page(table, MAX_LIMIT)
    assert len(body["items"]) == MAX_LIMIT and body["cursor"] is not None
    assert table.reads <= 5
    assert table.rows_read <= MAX_LIMIT + table.reads


def test_following_cursors_sees_every_item_once_whatever_the_sizes() -> None:
    rng = random.Random(42)
    sizes = [rng.choice([10, 1_000, 300_000, MB, 2 * MB]) for _ in range(80)]
    sizes[7] = 5 * MB  # one item larger than the budget on its own
    table = Table(sizes)
    for limit in (1, 3, 50, MAX_LIMIT):
        pages = walk(table, limit)
        seen = [item["item_id"] for body in pages for item in body["items"]]
        assert seen == [row.item_id for row in table.rows]
        for body in pages:
            assert 1 <= len(body["items"]) <= limit
            assert encoded_size(body["items"]) <= ITEMS_BUDGET


def test_an_item_past_the_budget_on_its_own_leaves_its_large_fields_out() -> None:
    """The page still fits: the large field is null and named with its size."""
    table = Table([10, 5 * MB, 10])
    pages = walk(table, MAX_LIMIT)
    assert [[item["item_id"] for item in body["items"]] for body in pages] == [
        ["r0000", "r0001", "r0002"]
    ]
    big = pages[0]["items"][1]
    assert big == {"item_id": "r0001", "input": None, "omitted": {"input": 5 * MB + 2}}
    assert all(encoded_size(body) < 5_000_000 for body in pages)
    assert json.loads(json.dumps(pages[-1]))["cursor"] is None
