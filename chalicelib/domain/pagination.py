"""What a page request is, independent of HTTP: size and where the previous page ended.

Services take a :class:`PageRequest` and return up to ``limit + 1`` items (the extra one
says there is a next page); :mod:`chalicelib.api.pagination` parses it from a query string
and renders the page with its opaque cursor.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

DEFAULT_LIMIT = 50
MAX_LIMIT = 200


@dataclass(frozen=True)
class PageRequest:
    """What the client asked for: page size and where the previous page ended."""

    limit: int = DEFAULT_LIMIT
    after_ts: datetime | None = None
    after_id: str | None = None

    def params(self) -> dict[str, Any]:
        """The keyset parameters every ``*_page`` / ``*_list`` named query takes."""
        return {
            "after_ts": self.after_ts,
            "after_id": self.after_id,
            "limit_plus_one": self.limit + 1,
        }
