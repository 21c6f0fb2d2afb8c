"""What a page of a list is: its size bounds and where the previous page ended.

Lists are keyset-paginated on ``(timestamp, id)``. Services read a :class:`PageRequest`;
turning query parameters into one and rows into a cursor is the API's part
(:mod:`chalicelib.api.pagination`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

DEFAULT_LIMIT = 50
MAX_LIMIT = 200


@dataclass(frozen=True)
class PageRequest:
    """What the client asked for: page size and where the previous page ended."""

    limit: int = DEFAULT_LIMIT
    after_ts: datetime | None = None
    after_id: str | None = None
