"""Wrong API keys are limited by default: past the failed-lookup budget the API answers
429 ``RATE_LIMITED`` with ``Retry-After`` and asks the database nothing, while a key it
knows keeps working."""

from __future__ import annotations

from typing import Any

import pytest

from chalicelib.services.api_keys import ApiKeyService
from tests.support.api_client import ApiClient

WRONG_KEYS = 60


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every key hash the API looked up in the database (the real lookup still runs)."""
    seen: list[bytes] = []
    original = ApiKeyService.scope_of

    def counted(self: ApiKeyService, key_hash: bytes) -> Any:
        seen.append(key_hash)
        return original(self, key_hash)

    monkeypatch.setattr(ApiKeyService, "scope_of", counted)
    return seen


def test_wrong_keys_past_the_budget_get_429_without_a_query(
    api: ApiClient, lookups: list[bytes]
) -> None:
    created = api.post("/keys", {"name": "reader", "scope": "read"})
    assert created.status == 201, created.body
    reader = ApiClient(api._client, created.body["api_key"])
    assert reader.get("/jobs").status == 200  # known (cached) before the flood
    lookups.clear()
    answers = [ApiClient(api._client, f"te_wrong_{n:04d}").get("/jobs") for n in range(WRONG_KEYS)]
    refused = [a for a in answers if a.status == 401]
    limited = [a for a in answers if a.status == 429]
    assert len(refused) + len(limited) == WRONG_KEYS
    assert limited, "no wrong key was rate limited"
    assert all(
        a.error_code == "RATE_LIMITED" and int(a.headers["retry-after"]) >= 1 for a in limited
    )
    assert len(lookups) == len(refused) < WRONG_KEYS  # a 429 cost no query
    assert reader.get("/jobs").status == 200
    assert api.get("/jobs").status == 200  # the bootstrap key needs no lookup
