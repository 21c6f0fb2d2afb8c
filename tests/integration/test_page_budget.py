"""Pages fit in a response: every list stops at its byte budget with a cursor.

Lambda refuses responses over 6 MB; the service keeps every list page under 5 MB by
ending it early, with the cursor of its last item, when the next item would carry the page
past its byte budget. Each test stores items of about 1 MB (inputs and config values near
the API's 1 MiB body limit), enough that one ``limit=200`` page would pass the budget, and
follows the cursors to the end: every response fits and every item is seen exactly once.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chalicelib.db.connection import Database
from tests.support.api_client import ApiClient
from tests.support.seed import jobs as f

EP = "send-welcome-email"
#: Below Lambda's 6 MB response limit, with room for headers.
RESPONSE_LIMIT = 5_000_000
#: Six items of this size make 6 MB: more than one response may carry.
BLOB = "x" * 1_000_000
COUNT = 6


@pytest.fixture
def endpoint(database: Database) -> str:
    return f.welcome_endpoint(database)


def walk(api: ApiClient, path: str, id_field: str) -> tuple[list[str], int]:
    """Follow ``path``'s cursors to the end: the ids in order and how many pages it took."""
    ids: list[str] = []
    pages = 0
    cursor = None
    while True:
        sep = "&" if "?" in path else "?"
        reply = api.get(path + (f"{sep}cursor={cursor}" if cursor else ""))
        assert reply.status == 200, reply.body
        # The body as the API encoded it (json.dumps with its defaults).
        assert len(json.dumps(reply.body)) < RESPONSE_LIMIT
        pages += 1
        ids += [item[id_field] for item in reply.body["items"]]
        cursor = reply.body["cursor"]
        if cursor is None:
            return ids, pages
        assert reply.body["items"], "a page with a cursor holds at least one item"


def assert_each_once(seen: list[str], expected: list[str], pages: int) -> None:
    assert pages >= 2, "the budget must have ended a page early"
    assert len(seen) == len(set(seen))
    assert seen == expected


def large_jobs(api: ApiClient) -> list[dict[str, Any]]:
    jobs = []
    for i in range(COUNT):
        reply = api.post(
            "/jobs",
            {
                "endpoint": EP,
                "trigger": "IMMEDIATE",
                "idempotency_key": f"big-{i}",
                "input": {"user_id": f"u{i}", "blob": BLOB},
            },
        )
        assert reply.status == 201, reply.body
        jobs.append(reply.body)
    return jobs


def test_job_and_execution_lists_stop_at_the_budget_with_a_cursor(
    api: ApiClient, endpoint: str
) -> None:
    jobs = large_jobs(api)
    newest_first = [job["job_id"] for job in reversed(jobs)]

    first = api.get("/jobs?limit=200").body
    assert first["cursor"] is not None
    assert 1 <= len(first["items"]) < COUNT
    assert all(item["input"]["blob"] == BLOB for item in first["items"])
    seen, pages = walk(api, "/jobs?limit=200", "job_id")
    assert_each_once(seen, newest_first, pages)

    executions = [job["execution"]["execution_id"] for job in reversed(jobs)]
    seen, pages = walk(api, "/executions?limit=200", "execution_id")
    assert_each_once(seen, executions, pages)

    # A small limit still pages by count: the budget only ever ends a page earlier.
    seen, pages = walk(api, "/jobs?limit=2", "job_id")
    assert (seen, pages) == (newest_first, COUNT // 2)


def test_a_jobs_executions_stop_at_the_budget(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    job = large_jobs(api)[0]
    start = datetime(2030, 1, 1, tzinfo=UTC)
    extra = [
        f.add_execution(
            database, job["job_id"], status="SUCCESS", created_at=start + timedelta(minutes=i)
        )
        for i in range(COUNT)
    ]
    expected = [*reversed(extra), job["execution"]["execution_id"]]
    seen, pages = walk(api, f"/jobs/{job['job_id']}/executions?limit=200", "execution_id")
    assert_each_once(seen, expected, pages)


def test_config_list_stops_at_the_budget(api: ApiClient) -> None:
    names = []
    for i in range(COUNT):
        reply = api.post("/configs", {"name": f"big-{i}", "values": {"blob": BLOB}})
        assert reply.status == 201, reply.body
        names.append(f"big-{i}")
    seen, pages = walk(api, "/configs?limit=200", "name")
    assert_each_once(seen, list(reversed(names)), pages)
