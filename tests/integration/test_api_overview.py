"""``GET /overview`` over real rows, and ``/ui`` served with its security headers."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from chalicelib.api.ui import UI_DIR
from chalicelib.db.connection import Database
from chalicelib.domain.statuses import ExecutionStatus
from chalicelib.scheduler.housekeeper import Housekeeper
from chalicelib.scheduler.promoter import recount_live
from tests.integration.test_lifecycle_plans import indexes_used
from tests.support.api_client import ApiClient
from tests.support.seed.jobs import add_execution, record_attempts, set_execution

ENDPOINT = {
    "name": "hook",
    "type": "HTTP",
    "spec": {"url": "http://127.0.0.1:9/x", "method": "POST"},
}


def _executions(api: ApiClient, count: int) -> list[str]:
    assert api.post("/endpoints", ENDPOINT).status == 201
    ids = []
    for i in range(count):
        body = {"endpoint": "hook", "trigger": "IMMEDIATE", "idempotency_key": f"k{i}"}
        reply = api.post("/jobs", body)
        assert reply.status == 201, reply.body
        ids.append(reply.body["execution"]["execution_id"])
    return ids


def _delivered(
    db: Database, execution_id: str, next_status: str, ago: timedelta, *, rolled: bool = False
) -> None:
    """One attempt recorded by the real finalize statement, its writer's minute row then
    moved ``ago`` into the past (as if recorded then). ``rolled``: as the housekeeper
    leaves it a day later: added to the endpoint's total, which the mark of 25 hours ago
    (the one a day's window subtracts) already holds."""
    worker = f"w-{execution_id}-{next_status}"
    error = None if next_status == "SUCCESS" else "TIMEOUT"
    record_attempts(db, execution_id, [(next_status, 5, error)], worker_id=worker)
    db.execute(
        "UPDATE delivery_counts SET bucket_start = date_trunc('minute',"
        " bucket_start - CAST(:ago AS INTERVAL)) WHERE writer LIKE :w",
        ago=f"{int(ago.total_seconds())} seconds",
        w=f"{worker}/%",
    )
    if rolled:
        db.execute(
            "UPDATE delivery_counts SET grain = 'total', writer = 'fold',"
            " bucket_start = '1970-01-01T00:00:00Z' WHERE writer LIKE :w",
            w=f"{worker}/%",
        )
        db.execute(
            "INSERT INTO delivery_marks (hour, endpoint, outcome, attempts, ended)"
            " SELECT date_trunc('hour', now() - INTERVAL '25 hours'), endpoint, outcome,"
            " sum(attempts), sum(ended)"
            " FROM delivery_counts WHERE grain = 'total' GROUP BY endpoint, outcome"
        )


def _beat(db: Database, component: str, status: str, at: datetime) -> None:
    db.execute(
        "INSERT INTO region_heartbeats (region, component, last_beat_at, status)"
        " VALUES ('default', :c, :at, :s)",
        c=component,
        at=at,
        s=status,
    )


def test_overview_counts_series_lag_workers_and_endpoint_outcomes(
    api: ApiClient, database: Database
) -> None:
    now = datetime.now(UTC)
    ok, failed, waiting, ended_long_ago = _executions(api, 4)
    _delivered(database, ok, "SUCCESS", timedelta(minutes=5))
    _delivered(database, failed, "RETRYING", timedelta(minutes=2))
    _delivered(database, failed, "FAILED", timedelta(0))
    _delivered(database, waiting, "RETRYING", timedelta(minutes=90))  # out of the hour
    set_execution(database, waiting, run_at=now - timedelta(seconds=7))
    # Ended two days ago: out of the counts' day (ended executions count over 24 h).
    _delivered(database, ended_long_ago, "SUCCESS", timedelta(days=2), rolled=True)
    _beat(database, "worker@a:1", "ALIVE", now)
    _beat(database, "worker@b:2", "DEAD", now)
    _beat(database, "worker@c:3", "ALIVE", now - timedelta(minutes=2))  # silent: DEAD
    _beat(database, "worker@gone:4", "ALIVE", now - timedelta(hours=2))  # history
    _beat(database, "scheduler@a:1", "ALIVE", now)  # not a worker
    recount_live(database)  # the promoter's count of what waits (every 15 s)

    reply = api.get("/overview")

    assert reply.status == 200, reply.body
    body = reply.body
    expected = {s.value: 0 for s in ExecutionStatus} | {"SUCCESS": 1, "FAILED": 1, "RETRYING": 1}
    assert body["executions_by_status"] == expected
    minutes = body["last_hour"]
    assert len(minutes) == 60
    assert [m["minute"] for m in minutes] == sorted(m["minute"] for m in minutes)
    assert sum(m["succeeded"] for m in minutes) == 1
    assert sum(m["failed"] for m in minutes) == 2
    assert minutes[-1]["failed"] >= 1  # the attempt finished now is in the current minute
    assert 7000 <= body["oldest_due_lag_ms"] < 120_000
    workers = {w["component"]: w["status"] for w in body["workers"]}
    assert workers == {"worker@a:1": "ALIVE", "worker@b:2": "DEAD", "worker@c:3": "DEAD"}
    # Executions (not attempts) that ended in the last 24 h, and live ones: 1 succeeded,
    # 1 failed, 1 retrying; the one that ended two days ago is out of the window.
    assert body["endpoints"] == [
        {"endpoint": "hook", "total": 3, "succeeded": 1, "failed": 1, "health": "FAILING"}
    ]


@pytest.mark.parametrize(
    ("outcomes", "health"),
    [
        ({"SUCCESS": 19, "FAILED": 1}, "HEALTHY"),  # one failure in twenty: 5 %
        ({"SUCCESS": 8, "FAILED": 1, "CANCELLED": 3, "RUNNING": 1}, "DEGRADED"),  # 1 in 9
        ({"SUCCESS": 1, "FAILED": 1, "QUEUED": 2}, "FAILING"),  # half of the finished ones
        ({"QUEUED": 1}, "HEALTHY"),  # nothing finished yet
    ],
)
def test_an_endpoint_and_its_only_job_have_the_same_health(
    api: ApiClient, database: Database, outcomes: dict[str, int], health: str
) -> None:
    """One definition, one window: the overview's endpoint health (the endpoint list and
    page show it, from the delivery summary rows and the live counts) and
    ``GET /jobs/{id}/status`` (from the job's executions) judge the same executions."""
    assert api.post("/endpoints", ENDPOINT).status == 201
    cron = {"endpoint": "hook", "trigger": "CRON", "cron": "0 3 * * *", "timezone": "UTC"}
    job_id = api.post("/jobs", cron).body["job_id"]
    now = datetime.now(UTC)
    for status, count in outcomes.items():
        for _ in range(count):
            if status in ("SUCCESS", "FAILED"):  # delivered as the worker records them
                execution_id = add_execution(
                    database, job_id, status="QUEUED", created_at=now - timedelta(hours=1)
                )
                error = None if status == "SUCCESS" else "HTTP_ERROR"
                record_attempts(database, execution_id, [(status, 5, error)])
            else:
                add_execution(database, job_id, status=status, created_at=now - timedelta(hours=1))
    # Ended two days ago: out of both windows, whatever its outcome.
    for _ in range(5):
        add_execution(database, job_id, status="FAILED", created_at=now - timedelta(days=2))

    recount_live(database)  # the promoter's count of what waits (every 15 s)
    status = api.get(f"/jobs/{job_id}/status").body
    (endpoint,) = api.get("/overview").body["endpoints"]

    assert status["health"] == endpoint["health"] == health
    stats = status["stats"]["last_24h"]
    assert {k: stats[k] for k in ("succeeded", "failed")} == {
        k: endpoint[k] for k in ("succeeded", "failed")
    }
    assert stats["total"] == sum(outcomes.values())
    # A cancelled execution is in its job's window, not in its endpoint's deliveries.
    assert endpoint["total"] == sum(outcomes.values()) - outcomes.get("CANCELLED", 0)


def test_endpoint_health_reads_the_summary_rows_not_the_history(database: Database) -> None:
    used = indexes_used(
        database,
        "overview_snapshot",
        now="2026-01-02T00:00:00Z",
        until="2026-01-02T00:00:00Z",
        health_since="2026-01-01T00:00:00Z",
        cancelled_since="2026-01-01T00:00:00Z",
        series_since="2026-01-01T23:01:00Z",
        workers_since="2026-01-01T23:00:00Z",
    )
    assert {"pk_delivery_counts", "pk_delivery_marks"} <= used, used


def test_overview_of_an_empty_service_and_without_a_key(api: ApiClient) -> None:
    body = api.get("/overview").body
    assert set(body["executions_by_status"].values()) == {0}
    assert body["oldest_due_lag_ms"] is None
    assert body["workers"] == [] and body["endpoints"] == []
    assert {m["succeeded"] + m["failed"] for m in body["last_hour"]} == {0}
    refused = api.get("/overview", auth=False)
    assert refused.status == 401 and refused.error_code == "UNAUTHORIZED"


def test_future_due_executions_are_not_lag(api: ApiClient, database: Database) -> None:
    (later,) = _executions(api, 1)
    set_execution(database, later, run_at=datetime.now(UTC) + timedelta(minutes=5))
    assert api.get("/overview").body["oldest_due_lag_ms"] is None


def test_dashboard_page_is_public_with_a_strict_policy(api: ApiClient) -> None:
    page = api.get("/ui", auth=False)
    assert page.status == 200
    assert page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    for directive in ("script-src 'self'", "frame-ancestors 'none'", "default-src 'none'"):
        assert directive in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    # No inline script: every <script> loads a file of this origin.
    scripts = re.findall(r"<script[^>]*>(.*?)</script>", page.body, re.S)
    assert scripts == [""] and 'src="ui/app.js"' in page.body
    script = api.get("/ui/app.js", auth=False)
    assert script.status == 200
    assert script.headers["content-type"].startswith("text/javascript")
    assert script.headers["content-security-policy"] == policy
    assert api.get("/ui/app.css", auth=False).headers["content-type"].startswith("text/css")


def test_only_dashboard_files_are_served(api: ApiClient) -> None:
    for name in ("nope.js", "..%2Fapi%2Fui.py", "ui.py", "APP.JS", ".hidden.js", "a.b.js", "1a.js"):
        reply = api.get(f"/ui/{name}", auth=False)
        assert reply.status == 404 and reply.error_code == "ROUTE_NOT_FOUND", name


def test_dashboard_code_never_parses_data_as_html() -> None:
    """The escaping rule, kept by construction: no API for turning a string into markup."""
    sinks = re.compile(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|Function\(")
    for path in UI_DIR.glob("*.js"):
        assert not sinks.search(path.read_text()), path.name
    imports = set()
    for path in UI_DIR.glob("*.js"):
        imports |= set(re.findall(r"from '\./([a-z]+\.js)'", path.read_text()))
    assert imports <= {p.name for p in UI_DIR.glob("*.js")}
    assert sum(p.stat().st_size for p in UI_DIR.iterdir()) < 64 * 1024  # the Lambda zip's budget


def test_rolling_the_summary_rows_up_changes_no_figure(api: ApiClient, database: Database) -> None:
    """The housekeeper moves each writer's minute rows into the totals and the all-endpoint
    series a few minutes after their minute (migration 019), and marks the totals each
    hour: the dashboard's last hour, its day by status and each endpoint's outcomes read
    the same before and after, only from fewer rows."""
    ok, failed, retried, fresh = _executions(api, 4)
    _delivered(database, ok, "SUCCESS", timedelta(minutes=30))
    _delivered(database, failed, "FAILED", timedelta(minutes=10))
    _delivered(database, retried, "RETRYING", timedelta(minutes=5))
    _delivered(database, fresh, "SUCCESS", timedelta(0))  # this minute: not rolled up
    before = api.get("/overview").body

    Housekeeper(database, retention_days=0).run_once()

    rows = database.run(
        "SELECT grain, count(*) AS n FROM delivery_counts GROUP BY grain ORDER BY grain"
    )
    assert rows == [
        {"grain": "minute", "n": 1},  # the fresh one's
        {"grain": "series", "n": 3},  # a row per minute and outcome
        {"grain": "total", "n": 2},  # hook's SUCCESS, and FAILED with TIMEOUT (both)
    ]
    after = api.get("/overview").body
    for key in ("last_hour", "executions_by_status", "endpoints"):
        assert after[key] == before[key], key
    (endpoint,) = after["endpoints"]
    assert (endpoint["succeeded"], endpoint["failed"]) == (2, 1)
