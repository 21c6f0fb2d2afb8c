"""``auto_pause_after_ms`` and ``paused_reason`` through the API: the default, null, the
bounds (400 naming the field, nothing written), a PUT, the representation everywhere."""

from __future__ import annotations

from typing import Any

import pytest

from chalicelib.db.connection import Database
from tests.support.api_client import ApiClient

HOOK: dict[str, Any] = {
    "name": "hook",
    "type": "HTTP",
    "spec": {"url": "https://example.test/hook", "method": "POST"},
}


def test_the_window_defaults_to_five_days_and_shows_everywhere(api: ApiClient) -> None:
    created = api.post("/endpoints", HOOK)
    assert created.status == 201, created.body
    for body in (
        created.body,
        api.get("/endpoints/hook").body,
        api.get("/endpoints").body["items"][0],
    ):
        assert body["auto_pause_after_ms"] == 432_000_000
        assert body["paused_reason"] is None


def test_null_turns_the_rule_off_and_a_put_sets_it(api: ApiClient, database: Database) -> None:
    created = api.post("/endpoints", {**HOOK, "auto_pause_after_ms": None})
    assert created.status == 201 and created.body["auto_pause_after_ms"] is None
    stored = database.run("SELECT auto_pause_after_ms FROM endpoints WHERE name = 'hook'")
    assert stored == [{"auto_pause_after_ms": None}]

    updated = api.put("/endpoints/hook", {**HOOK, "auto_pause_after_ms": 3_600_000})
    assert updated.status == 200 and updated.body["auto_pause_after_ms"] == 3_600_000
    # A PUT that omits it returns it to its default, as every optional field.
    assert api.put("/endpoints/hook", HOOK).body["auto_pause_after_ms"] == 432_000_000


@pytest.mark.parametrize("value", [59_999, 2_592_000_001, -5, "1h", True, 90_000.5, {}])
def test_a_bad_window_is_400_naming_the_field_and_writes_nothing(
    api: ApiClient, database: Database, value: Any
) -> None:
    reply = api.post("/endpoints", {**HOOK, "auto_pause_after_ms": value})
    assert (reply.status, reply.error_code) == (400, "INVALID_REQUEST"), reply.body
    assert reply.body["error"]["message"] == (
        "Field 'auto_pause_after_ms' must be an integer between 60000 and 2592000000 "
        "(milliseconds), or null to never pause the endpoint for failing."
    )
    assert database.run("SELECT name FROM endpoints") == []


def test_a_manual_pause_over_an_automatic_one_keeps_its_reason(
    api: ApiClient, database: Database
) -> None:
    api.post("/endpoints", HOOK)
    database.run("UPDATE endpoints SET paused_at = now(), paused_reason = 'GONE'")
    again = api.post("/endpoints/hook/pause")
    assert again.body["paused_reason"] == "GONE"  # the pause began as GONE
    # Registered again after a delete: a new endpoint, running.
    api.post("/endpoints/hook/resume")
    api.post("/endpoints/hook/pause")
    assert api.delete("/endpoints/hook").status == 204
    back = api.post("/endpoints", HOOK)
    assert (back.body["paused_at"], back.body["paused_reason"]) == (None, None)


def test_a_pause_from_before_reasons_were_kept_reads_as_operator(
    api: ApiClient, database: Database
) -> None:
    api.post("/endpoints", HOOK)
    database.run("UPDATE endpoints SET paused_at = now(), paused_reason = NULL")
    assert api.get("/endpoints/hook").body["paused_reason"] == "OPERATOR"
