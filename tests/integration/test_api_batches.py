"""POST /jobs/batch, GET /batches/{id}, GET /batches/{id}/jobs, POST /batches/{id}/cancel,
on real PostgreSQL at SERIALIZABLE through the app."""

from __future__ import annotations

from typing import Any

import pytest

from chalicelib.db.connection import Database
from tests.support.api_client import ApiClient
from tests.support.seed import jobs as f

EP = "send-welcome-email"


@pytest.fixture
def endpoint(database: Database) -> str:
    return f.welcome_endpoint(database)


def immediate(key: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "endpoint": EP,
        "trigger": "IMMEDIATE",
        "idempotency_key": key,
        "input": {"user_id": "u_1"},
    }
    body.update(extra)
    return body


#: One item of every kind a batch must refuse on its own, with the status and code it gets.
INVALID: list[tuple[Any, int, str]] = [
    ("not an object", 400, "INVALID_REQUEST"),
    ({"endpoint": EP, "idempotency_key": "k"}, 400, "INVALID_REQUEST"),  # no trigger
    (immediate("k-bad-trigger", trigger="SOMETIMES"), 400, "INVALID_REQUEST"),
    (immediate("k-unknown", colour="red"), 400, "INVALID_REQUEST"),
    ({"endpoint": EP, "trigger": "IMMEDIATE", "input": {"user_id": "u"}}, 400, "INVALID_REQUEST"),
    (immediate("k-run-at", trigger="DELAYED", run_at="tomorrow"), 400, "INVALID_REQUEST"),
    (immediate("k-no-endpoint", endpoint="nope"), 404, "ENDPOINT_NOT_FOUND"),
    (immediate("k-input", input={"count": 3}), 422, "INPUT_VALIDATION_FAILED"),
    (
        {"endpoint": EP, "trigger": "CRON", "cron": "61 * * * *", "timezone": "UTC"},
        422,
        "INVALID_CRON",
    ),
    (immediate("k-callback", on_success="nope"), 422, "INVALID_CALLBACK"),
]


def count(db: Database, sql: str) -> int:
    return int(db.run(sql)[0]["n"])


def test_a_partial_batch_creates_the_valid_items_and_answers_each_in_order(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    valid = [
        immediate("k-now"),
        immediate("k-later", trigger="DELAYED", run_at="2030-01-01T00:00:00Z"),
        {
            "endpoint": EP,
            "trigger": "CRON",
            "cron": "0 9 * * *",
            "timezone": "UTC",
            "input": {"user_id": "u_2"},
        },
    ]
    reply = api.post("/jobs/batch", {"jobs": valid + [item for item, _, _ in INVALID]})
    assert reply.status == 200, reply.body
    batch_id = reply.body["batch_id"]
    items = reply.body["items"]
    assert [i["status"] for i in items[:3]] == [201, 201, 201]
    assert [i["job"]["trigger"] for i in items[:3]] == ["IMMEDIATE", "DELAYED", "CRON"]
    assert items[0]["job"]["execution"]["status"] == "QUEUED"
    assert items[1]["job"]["execution"]["status"] == "PENDING"
    assert all(i["job"]["batch_id"] == batch_id for i in items[:3])
    got = [(i["status"], i["error"]["code"]) for i in items[3:]]
    assert got == [(status, code) for _, status, code in INVALID]
    assert all(set(i) == {"status", "error"} for i in items[3:])
    rows = database.run(
        "SELECT j.trigger_type, j.batch_id AS jb, e.batch_id AS eb FROM jobs j"
        " LEFT JOIN executions e USING (job_id) ORDER BY j.trigger_type"
    )
    assert [(r["trigger_type"], r["jb"], r["eb"]) for r in rows] == [
        ("CRON", batch_id, None),
        ("DELAYED", batch_id, batch_id),
        ("IMMEDIATE", batch_id, batch_id),
    ]
    batch = api.get(f"/batches/{batch_id}").body
    assert (batch["total"], batch["status"]) == (3, "RUNNING")
    assert (batch["counts"]["QUEUED"], batch["counts"]["PENDING"]) == (1, 1)
    assert api.get(f"/jobs/{items[0]['job']['job_id']}").body["batch_id"] == batch_id


@pytest.mark.parametrize(("item", "status", "code"), INVALID)
def test_an_atomic_batch_with_one_invalid_item_writes_nothing(
    api: ApiClient, database: Database, endpoint: str, item: Any, status: int, code: str
) -> None:
    reply = api.post("/jobs/batch", {"jobs": [immediate("k-1"), item], "atomic": True})
    assert reply.status == 422
    error = reply.body["error"]
    assert error["code"] == "BATCH_REJECTED"
    [rejected] = error["items"]
    assert (rejected["index"], rejected["status"], rejected["error"]["code"]) == (1, status, code)
    assert count(database, "SELECT count(*) AS n FROM jobs") == 0
    assert count(database, "SELECT count(*) AS n FROM executions") == 0
    assert count(database, "SELECT count(*) AS n FROM batches") == 0


def test_an_atomic_batch_of_valid_items_is_created(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    reply = api.post("/jobs/batch", {"jobs": [immediate("a"), immediate("b")], "atomic": True})
    assert reply.status == 200
    assert [i["status"] for i in reply.body["items"]] == [201, 201]
    assert count(database, "SELECT count(*) AS n FROM executions WHERE batch_id IS NOT NULL") == 2


def test_more_than_a_thousand_items_is_413_naming_the_limit(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    reply = api.post("/jobs/batch", {"jobs": [immediate(f"k{i}") for i in range(1001)]})
    assert reply.status == 413
    assert "1000" in reply.body["error"]["message"]
    assert count(database, "SELECT count(*) AS n FROM jobs") == 0


def test_a_thousand_items_are_accepted(api: ApiClient, database: Database, endpoint: str) -> None:
    reply = api.post("/jobs/batch", {"jobs": [immediate(f"k{i}") for i in range(1000)]})
    assert reply.status == 200
    assert {i["status"] for i in reply.body["items"]} == {201}
    assert count(database, "SELECT count(*) AS n FROM executions") == 1000
    logs = count(database, "SELECT count(*) AS n FROM execution_logs")
    assert logs == 1000  # every execution has the log line of its creation


@pytest.mark.parametrize(
    "body",
    [{}, {"jobs": []}, {"jobs": "x"}, {"jobs": [{}], "atomic": "yes"}, {"jobs": [{}], "x": 1}],
)
def test_a_malformed_envelope_is_400(api: ApiClient, endpoint: str, body: Any) -> None:
    assert api.post("/jobs/batch", body).status == 400


def test_unknown_on_complete_endpoint_is_422(api: ApiClient, endpoint: str) -> None:
    reply = api.post("/jobs/batch", {"jobs": [immediate("a")], "on_complete": "nope"})
    assert (reply.status, reply.error_code) == (422, "INVALID_CALLBACK")


def test_idempotency_inside_a_batch_and_across_batches(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    first = api.post("/jobs/batch", {"jobs": [immediate("dup"), immediate("dup", input={})]})
    a, b = first.body["items"]
    assert (a["status"], b["status"]) == (201, 200)
    assert a["job"]["job_id"] == b["job"]["job_id"]
    second = api.post("/jobs/batch", {"jobs": [immediate("dup"), immediate("new")]})
    c, d = second.body["items"]
    assert (c["status"], d["status"]) == (200, 201)
    assert c["job"]["job_id"] == a["job"]["job_id"]
    assert c["job"]["batch_id"] == first.body["batch_id"]  # it stays the first batch's
    single = api.post("/jobs", immediate("dup"))
    assert (single.status, single.body["job_id"]) == (200, a["job"]["job_id"])
    assert count(database, "SELECT count(*) AS n FROM jobs") == 2
    assert api.get(f"/batches/{second.body['batch_id']}").body["total"] == 1


def test_a_known_key_wins_over_a_refused_item(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    """Keys are looked up before the insert only for refused items: a known one is still a
    200 with its job, whatever made the item invalid, and an unknown one stays a 422."""
    first = api.post("/jobs/batch", {"jobs": [immediate("known")]})
    job_id = first.body["items"][0]["job"]["job_id"]
    reply = api.post(
        "/jobs/batch",
        {
            "jobs": [
                immediate("known", input={"count": 3}),  # fails the payload spec
                immediate("fresh", input={"count": 3}),
                immediate("known", on_success="nope"),  # an unknown callback endpoint
            ]
        },
    )
    items = reply.body["items"]
    assert [i["status"] for i in items] == [200, 422, 200]
    assert items[0]["job"]["job_id"] == items[2]["job"]["job_id"] == job_id
    assert items[1]["error"]["code"] == "INPUT_VALIDATION_FAILED"
    assert count(database, "SELECT count(*) AS n FROM jobs") == 1


def test_batch_jobs_are_paged_and_filtered_by_execution_status(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    reply = api.post("/jobs/batch", {"jobs": [immediate(f"k{i}") for i in range(5)]})
    batch_id = reply.body["batch_id"]
    ids = [i["job"]["execution"]["execution_id"] for i in reply.body["items"]]
    f.set_execution(database, ids[0], status="SUCCESS")
    seen: list[str] = []
    cursor = None
    while True:
        query = "limit=2" + (f"&cursor={cursor}" if cursor else "")
        page = api.get(f"/batches/{batch_id}/jobs?{query}").body
        seen += [j["job_id"] for j in page["items"]]
        cursor = page["cursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(i["job"]["job_id"] for i in reply.body["items"])
    done = api.get(f"/batches/{batch_id}/jobs?status=SUCCESS").body["items"]
    assert [j["execution"]["execution_id"] for j in done] == [ids[0]]
    assert api.get(f"/batches/{batch_id}/jobs?status=NOPE").status == 400
    assert api.get("/batches/batch_nope/jobs").status == 404


def test_unknown_batch_is_404(api: ApiClient) -> None:
    reply = api.get("/batches/batch_nope")
    assert (reply.status, reply.error_code) == (404, "BATCH_NOT_FOUND")
    assert api.post("/batches/batch_nope/cancel").status == 404


def test_cancel_of_a_half_finished_batch_cancels_what_is_cancellable(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    jobs = [immediate(f"k{i}") for i in range(5)]
    reply = api.post("/jobs/batch", {"jobs": jobs})
    batch_id = reply.body["batch_id"]
    ids = [i["job"]["execution"]["execution_id"] for i in reply.body["items"]]
    f.set_execution(database, ids[0], status="SUCCESS")
    f.set_execution(database, ids[1], status="FAILED")
    f.set_execution(database, ids[2], status="RUNNING", worker_id="w1", attempt_count=1)
    cancelled = api.post(f"/batches/{batch_id}/cancel")
    assert cancelled.status == 200
    assert cancelled.body["cancelled"] == 2
    batch = cancelled.body["batch"]
    assert batch["status"] == "RUNNING"  # the RUNNING child finishes on its own
    assert {k: v for k, v in batch["counts"].items() if v} == {
        "SUCCESS": 1,
        "FAILED": 1,
        "RUNNING": 1,
        "CANCELLED": 2,
    }
    logs = database.run(
        "SELECT message FROM execution_logs WHERE execution_id = :id ORDER BY logged_at DESC",
        id=ids[3],
    )
    assert "batch" in logs[0]["message"]
    again = api.post(f"/batches/{batch_id}/cancel").body
    assert again["cancelled"] == 0
    f.set_execution(database, ids[2], status="SUCCESS")
    done = api.get(f"/batches/{batch_id}").body
    assert done["status"] == "COMPLETED" and done["completed_at"] is not None


def test_the_idempotency_lookup_probes_the_unique_index_even_on_a_tiny_table(
    database: Database, endpoint: str
) -> None:
    """Each (endpoint, key) pair is one index probe. A sequential scan of jobs (what the
    planner chose for a small table when the lookup was written as IN (SELECT ...)) locks
    the whole relation at SERIALIZABLE, and concurrent POST /jobs ran out of 40001 retries."""
    import json

    from chalicelib.db.queries import queries

    pairs = json.dumps([{"endpoint": EP, "key": "a"}, {"endpoint": EP, "key": "b"}])
    row = database.run(
        "EXPLAIN (FORMAT JSON) " + queries["jobs_find_by_idempotency_keys"].sql, pairs=pairs
    )[0]
    document = next(iter(row.values()))
    plan = (json.loads(document) if isinstance(document, str) else document)[0]["Plan"]

    def nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
        return [node] + [n for child in node.get("Plans", []) for n in nodes(child)]

    on_jobs = [n for n in nodes(plan) if n.get("Relation Name") == "jobs"]
    assert [n.get("Index Name") for n in on_jobs] == ["idx_jobs_idempotency"], on_jobs


def test_eight_clients_creating_distinct_jobs_are_all_created(
    database: Database, endpoint: str
) -> None:
    """Through the service (chalice's test client shares its current request between
    threads): the lookup's index probes let distinct creations commit side by side."""
    import threading
    from datetime import UTC, datetime

    from chalicelib.services.jobs.service import JobService

    service = JobService(database, lambda: datetime.now(UTC))
    barrier = threading.Barrier(8)
    outcomes: list[Any] = []

    def post(client: int) -> None:
        barrier.wait()
        for i in range(5):
            try:
                outcomes.append(service.create(immediate(f"c{client}-{i}")).created)
            except Exception as exc:  # reported below
                outcomes.append(exc)

    threads = [threading.Thread(target=post, args=(c,)) for c in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes == [True] * 40
    assert count(database, "SELECT count(*) AS n FROM executions") == 40


@pytest.mark.parametrize("kind", ["only CRON items", "only taken keys"])
def test_a_batch_with_no_execution_fires_its_on_complete_at_creation(
    api: ApiClient, database: Database, endpoint: str, kind: str
) -> None:
    """Such a batch is COMPLETED at creation; no child ending will ever fire its on_complete,
    so creation does (it never fired before)."""
    f.endpoint(database, "batch-done")
    if kind == "only CRON items":
        items = [{"endpoint": EP, "trigger": "CRON", "cron": "0 9 * * *", "timezone": "UTC"}]
    else:
        assert api.post("/jobs", immediate("k-taken")).status == 201
        items = [immediate("k-taken")]
    reply = api.post("/jobs/batch", {"jobs": items, "on_complete": "batch-done"})
    assert reply.status == 200, reply.body
    batch_id = reply.body["batch_id"]
    assert api.get(f"/batches/{batch_id}").body["status"] == "COMPLETED"
    fired = database.run(
        "SELECT idempotency_key FROM jobs WHERE endpoint = 'batch-done'",
    )
    assert [r["idempotency_key"] for r in fired] == [f"batch:{batch_id}"]
