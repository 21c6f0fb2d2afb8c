"""Routes for /configs (being implemented)."""

from __future__ import annotations

from typing import Any

from chalicelib.api.http import Resource

resource = Resource(__name__)

#: OpenAPI fragment: {"paths": {...}, "schemas": {...}} merged by chalicelib.api.meta.
OPENAPI: dict[str, Any] = {"paths": {}, "schemas": {}}
