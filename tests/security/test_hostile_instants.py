"""Instants the service cannot carry never get in, and a stored one never breaks a read.

The finding these hold: ``ends_at: 9999-12-31T23:59:59-14:00`` (10000-01-01 in UTC) was
answered 500 but committed; pg8000 then read the row back as a ``str``, every ``GET /jobs``
answered 500 and the materializer's loop died on it. Times in query parameters and forged
cursors at the far ends of the calendar were 500s too.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from chalicelib.db.connection import Database, DatabaseError
from chalicelib.db.statements import timestamptz_in
from chalicelib.domain.timefmt import EARLIEST_INSTANT, LATEST_INSTANT
from tests.support.api_client import ApiClient
from tests.support.factories import register_endpoint

PAST_THE_END = "9999-12-31T23:59:59-14:00"  # 10000-01-01T13:59:59 in UTC
BEFORE_YEAR_ONE = "0001-01-01T00:00:00+14:00"  # year 0 in UTC
OUT_OF_RANGE = [PAST_THE_END, BEFORE_YEAR_ONE, "1969-12-31T23:59:59Z", "9999-01-01T00:00:00Z"]


def _count(database: Database, table: str) -> int:
    return int(database.run(f"SELECT count(*) AS n FROM {table}")[0]["n"])


def _cursor(t: str, k: str = "job_x") -> str:
    raw = json.dumps({"v": 1, "t": t, "k": k}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize("value", OUT_OF_RANGE)
@pytest.mark.parametrize(
    ("field", "body"),
    [
        ("ends_at", {"trigger": "CRON", "cron": "* * * * *", "timezone": "UTC"}),
        ("starts_at", {"trigger": "CRON", "cron": "* * * * *", "timezone": "UTC"}),
        ("run_at", {"trigger": "DELAYED", "idempotency_key": "k"}),
    ],
)
def test_a_job_instant_out_of_range_is_a_400_naming_the_field_and_nothing_is_written(
    api: ApiClient, database: Database, field: str, body: dict[str, Any], value: str
) -> None:
    register_endpoint(api, "e")
    reply = api.post("/jobs", {"endpoint": "e", **body, field: value})
    assert reply.status == 400, reply.body
    assert reply.error_code == "INVALID_REQUEST"
    assert f"'{field}'" in reply.body["error"]["message"]
    assert _count(database, "jobs") == 0 and _count(database, "executions") == 0
    # The service goes on reading its jobs (the 500s of the finding came from a stored row).
    assert api.get("/jobs").status == 200


def test_the_last_instants_inside_the_range_are_accepted_and_read_back(api: ApiClient) -> None:
    register_endpoint(api, "e")
    reply = api.post(
        "/jobs",
        {
            "endpoint": "e",
            "trigger": "CRON",
            "cron": "* * * * *",
            "timezone": "Pacific/Kiritimati",  # UTC+14: the zone that renders furthest ahead
            "ends_at": "9998-12-31T23:59:59Z",
        },
    )
    assert reply.status == 201, reply.body
    job_id = reply.body["job_id"]
    assert api.get(f"/jobs/{job_id}").status == 200
    assert api.get("/jobs?trigger=CRON").status == 200
    assert api.get(f"/jobs/{job_id}/status").status == 200


def test_put_with_an_out_of_range_end_is_a_400(api: ApiClient, database: Database) -> None:
    register_endpoint(api, "e")
    created = api.post(
        "/jobs", {"endpoint": "e", "trigger": "CRON", "cron": "* * * * *", "timezone": "UTC"}
    )
    assert created.status == 201
    reply = api.put(f"/jobs/{created.body['job_id']}", {"ends_at": PAST_THE_END})
    assert reply.status == 400 and "'ends_at'" in reply.body["error"]["message"]
    assert _count(database, "jobs") == 1


@pytest.mark.parametrize("value", [PAST_THE_END, BEFORE_YEAR_ONE])
@pytest.mark.parametrize("name", ["since", "until"])
def test_execution_filters_out_of_range_are_a_400(api: ApiClient, name: str, value: str) -> None:
    reply = api.get(f"/executions?{name}={value.replace('+', '%2B')}")
    assert reply.status == 400, reply.body
    assert f"'{name}'" in reply.body["error"]["message"]


@pytest.mark.parametrize("value", [PAST_THE_END, BEFORE_YEAR_ONE])
def test_redrive_range_out_of_range_is_a_400(api: ApiClient, value: str) -> None:
    register_endpoint(api, "e")
    reply = api.post("/endpoints/e/redrive", {"since": value, "until": "2030-01-01T00:00:00Z"})
    if value == PAST_THE_END:
        reply = api.post("/endpoints/e/redrive", {"since": "2020-01-01T00:00:00Z", "until": value})
    assert reply.status == 400, reply.body
    assert reply.error_code == "INVALID_REQUEST"


@pytest.mark.parametrize(
    "cursor",
    [
        _cursor("9999-12-31T23:59:59-14:00"),
        _cursor("0001-01-01T00:00:00+14:00"),
        _cursor("2026-01-01T00:00:00+00:00", k="x\u0000y"),
        _cursor("2026-01-01T00:00:00+00:00", k="k" * 1000),
        "A" * 5000,
    ],
)
@pytest.mark.parametrize("path", ["/jobs", "/executions", "/jobs?status=ACTIVE", "/endpoints"])
def test_forged_cursors_are_a_400(api: ApiClient, path: str, cursor: str) -> None:
    sep = "&" if "?" in path else "?"
    reply = api.get(f"{path}{sep}cursor={cursor}")
    assert reply.status == 400, reply.body
    assert reply.error_code == "INVALID_REQUEST"


def test_the_schema_refuses_an_instant_out_of_range(database: Database) -> None:
    database.execute("INSERT INTO endpoints (name, endpoint_type, spec) VALUES ('e', 'HTTP', '{}')")
    for column in ("run_at", "cron_starts_at", "cron_ends_at", "cron_next_run_at"):
        with pytest.raises(DatabaseError):
            database.execute(
                "INSERT INTO jobs (endpoint, endpoint_type, trigger_type, "
                f"{column}) VALUES ('e', 'HTTP', 'DELAYED', '10000-01-01 00:00:00+00')"
            )
    job_id = database.run(
        "INSERT INTO jobs (endpoint, endpoint_type, trigger_type) "
        "VALUES ('e', 'HTTP', 'IMMEDIATE') RETURNING job_id"
    )[0]["job_id"]
    with pytest.raises(DatabaseError):
        database.execute(
            "INSERT INTO executions (job_id, endpoint, endpoint_type, run_at) "
            "VALUES (:j, 'e', 'HTTP', '1969-12-31 23:59:59+00')",
            j=job_id,
        )


def test_a_stored_time_no_datetime_can_hold_still_reads(api: ApiClient, database: Database) -> None:
    """Columns the API never sets have no CHECK; a value written by hand must not make a read
    fail: it reads as the nearest bound of the range."""
    register_endpoint(api, "e")
    created = api.post("/jobs", {"endpoint": "e", "trigger": "IMMEDIATE", "idempotency_key": "k"})
    assert created.status == 201
    execution_id = created.body["execution"]["execution_id"]
    database.execute(
        "UPDATE executions SET status = 'SUCCESS', started_at = '-infinity', "
        "completed_at = 'infinity' WHERE execution_id = :e",
        e=execution_id,
    )
    reply = api.get(f"/executions/{execution_id}")
    assert reply.status == 200, reply.body
    assert reply.body["completed_at"] == "9999-01-01T00:00:00Z"
    assert api.get(f"/jobs/{created.body['job_id']}").status == 200
    assert api.get("/executions").status == 200


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10000-01-01 00:00:00+00", LATEST_INSTANT),
        ("infinity", LATEST_INSTANT),
        ("-infinity", EARLIEST_INSTANT),
        ("0044-03-15 00:00:00+00 BC", EARLIEST_INSTANT),
        ("9999-12-31 23:59:59+00", LATEST_INSTANT),
        ("1900-01-01 00:00:00+00", EARLIEST_INSTANT),
    ],
)
def test_the_timestamp_decoder_always_answers_a_datetime_in_range(text: str, expected: Any) -> None:
    assert timestamptz_in(text) == expected


def test_the_timestamp_decoder_keeps_ordinary_values() -> None:
    value = timestamptz_in("2026-11-25 01:29:12.5+00")
    assert value.isoformat() == "2026-11-25T01:29:12.500000+00:00"
