"""GET /health and GET /metrics against the real database.

/metrics is read with prometheus_client's own text parser, so the exposition is what a
real Prometheus server accepts; every figure is checked against rows the test wrote,
and the cron and reclaim counts against the real materializer and reclaimer.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from chalicelib.db.connection import Database
from chalicelib.db.queries import queries
from chalicelib.scheduler.housekeeper import Housekeeper
from chalicelib.scheduler.materializer import CronMaterializer
from chalicelib.scheduler.promoter import recount_live
from chalicelib.scheduler.reclaimer import StuckReclaimer
from chalicelib.services.metrics import MetricsService
from tests.integration.test_lifecycle_plans import indexes_used
from tests.support.api_client import ApiClient
from tests.support.plans import bounded
from tests.support.seed import jobs as f
from tests.support.seed.worker import http_spec, seed
from tests.support.served import free_port


def scrape(api: ApiClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``{(sample name, sorted labels): value}`` as Prometheus's parser reads /metrics."""
    reply = api.get("/metrics")
    assert reply.status == 200, reply.body
    assert reply.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    found = {}
    for family in text_string_to_metric_families(reply.body):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def job(api: ApiClient, endpoint: str, key: str) -> str:
    body = {"endpoint": endpoint, "trigger": "IMMEDIATE", "idempotency_key": key, "input": {}}
    reply = api.post("/jobs", body)
    assert reply.status == 201, reply.body
    return str(reply.body["execution"]["execution_id"])


def test_health_needs_no_key_and_says_the_database_answers(api: ApiClient) -> None:
    reply = api.get("/health", auth=False)
    assert (reply.status, reply.body) == (
        200,
        {
            "status": "ok",
            "database": "ok",
            "profile": "full",
            # The answering API process beat before it read; nothing else has run.
            "processes": {"api": 1, "scheduler": 0, "worker": 0},
        },
    )


def test_health_is_503_in_the_envelope_when_the_database_is_unreachable(
    api: ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nothing listens on this loopback port: the pool cannot connect.
    monkeypatch.setenv("TE_DATABASE_URL", f"postgresql://te@127.0.0.1:{free_port()}/te")
    api.restart()
    reply = api.get("/health", auth=False)
    assert reply.status == 503
    error = reply.body["error"]
    assert error["code"] == "DATABASE_UNAVAILABLE"
    assert error["request_id"].startswith("req_")
    assert "127.0.0.1" not in error["message"]  # the connection target is never shown


def test_health_follows_the_database_going_away_and_coming_back(
    api: ApiClient, db_url: str, pg_server: Any
) -> None:
    """The database refuses this service's connections (as a stopped one does) after the
    pool already held one: 503 while it lasts, 200 again once it answers."""
    assert api.get("/health", auth=False).status == 200
    name = db_url.split("?", 1)[0].rsplit("/", 1)[1]
    admin = pg_server.admin()
    try:
        admin.run(f"ALTER DATABASE {name} ALLOW_CONNECTIONS false")
        admin.run(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :n", n=name
        )
        down = api.get("/health", auth=False)
        assert (down.status, down.error_code) == (503, "DATABASE_UNAVAILABLE")
    finally:
        admin.run(f"ALTER DATABASE {name} ALLOW_CONNECTIONS true")
        admin.close()
    assert api.get("/health", auth=False).status == 200


def test_metrics_needs_the_api_key(api: ApiClient) -> None:
    reply = api.get("/metrics", auth=False)
    assert (reply.status, reply.error_code) == (401, "UNAUTHORIZED")


def test_an_empty_deployment_scrapes_with_zeros_and_nan_quantiles(api: ApiClient) -> None:
    found = scrape(api)
    assert found[("te_oldest_due_lag_seconds", ())] == 0
    for status in ("SUCCESS", "FAILED", "CANCELLED"):
        assert found[("te_executions_finished_last_minute", (("status", status),))] == 0
    median = found[("te_attempt_duration_seconds", (("quantile", "0.5"),))]
    assert median != median  # NaN: no attempt finished
    assert found[("te_cron_ticks_materialized_last_minute", ())] == 0
    assert found[("te_executions_reclaimed_last_minute", ())] == 0


def test_queue_depth_lag_and_finished_executions_come_from_the_database(
    api: ApiClient, database: Database
) -> None:
    f.endpoint(database, "a")
    f.endpoint(database, 'b"\\odd\nname')  # label escaping must survive the real parser
    f.endpoint(database, "p")
    now = datetime.now(UTC)
    queued = [job(api, "a", f"q{n}") for n in range(4)]
    f.set_execution(database, queued[0], run_at=now - timedelta(seconds=90))
    assert api.post(f"/executions/{queued[3]}/cancel", {}).status == 200
    # A paused endpoint's backlog is not lag, however old.
    paused = job(api, "p", "p")
    f.set_execution(database, paused, run_at=now - timedelta(seconds=600))
    assert api.post("/endpoints/p/pause", {}).status == 200
    running = job(api, 'b"\\odd\nname', "r")
    f.set_execution(database, running, status="RUNNING", started_at=now)
    done = [job(api, "a", f"d{n}") for n in range(3)]
    # Delivered as the worker records them: each attempt a finalize statement.
    retries = [("RETRYING", ms, "HTTP_5XX") for ms in (100, 200, 300, 400)]
    f.record_attempts(database, done[0], [*retries, ("SUCCESS", 5000, None)])
    f.record_attempts(database, done[1], [("SUCCESS", 50, None)])
    f.record_attempts(database, done[2], [("FAILED", 50, "TIMEOUT")])

    assert ("te_queue_depth", (("endpoint", "a"), ("status", "QUEUED"))) not in scrape(api)
    recount_live(database)  # the promoter's count: what waits is counted every 15 s
    found = scrape(api)
    assert found[("te_queue_depth", (("endpoint", "a"), ("status", "QUEUED")))] == 3
    assert found[("te_queue_depth", (("endpoint", 'b"\\odd\nname'), ("status", "RUNNING")))] == 1
    assert not any(k[0] == "te_queue_depth" and ("status", "SUCCESS") in k[1] for k in found)
    assert 90 <= found[("te_oldest_due_lag_seconds", ())] < 600
    assert found[("te_endpoint_lag_seconds", (("endpoint", "a"),))] >= 90
    assert ("te_endpoint_lag_seconds", (("endpoint", "p"),)) not in found
    finished = {
        s: found[("te_executions_finished_last_minute", (("status", s),))]
        for s in ("SUCCESS", "FAILED", "CANCELLED")
    }
    assert finished == {"SUCCESS": 2, "FAILED": 1, "CANCELLED": 1}
    assert found[("te_attempts_finished_last_minute", ())] == 7
    # Estimated from the buckets: rank 3.5 of 7 lies in (100, 250] ms, the 4th attempt.
    assert found[("te_attempt_duration_seconds", (("quantile", "0.5"),))] == pytest.approx(0.175)
    assert found[("te_attempt_duration_seconds", (("quantile", "0.99"),))] > 4
    # The counters alerting rates are taken of.
    assert found[("te_delivery_attempts_total", (("endpoint", "a"), ("outcome", "SUCCESS")))] == 2
    assert found[("te_delivery_attempts_total", (("endpoint", "a"), ("outcome", "FAILED")))] == 5
    failed = "te_delivery_attempts_failed_total"
    assert found[(failed, (("endpoint", "a"), ("error_type", "HTTP_5XX")))] == 4
    assert found[(failed, (("endpoint", "a"), ("error_type", "TIMEOUT")))] == 1
    ended = "te_executions_ended_total"
    assert found[(ended, (("endpoint", "a"), ("status", "SUCCESS")))] == 2
    assert found[(ended, (("endpoint", "a"), ("status", "FAILED")))] == 1


def test_counters_never_go_down_when_the_housekeeper_folds_old_summary_rows(
    api: ApiClient, database: Database
) -> None:
    f.endpoint(database, "a")
    done = [job(api, "a", f"d{n}") for n in range(3)]
    for execution_id in done:
        f.record_attempts(database, execution_id, [("SUCCESS", 20, None)])
    before = scrape(api)
    key = ("te_delivery_attempts_total", (("endpoint", "a"), ("outcome", "SUCCESS")))
    assert before[key] == 3
    # Days later, the writers' minute rows are rolled up into the totals (and the series,
    # pruned by then) and the hour's mark of the totals is taken.
    keeper = Housekeeper(
        database,
        retention_days=0,
        batch_size=1,
        clock=lambda: datetime.now(UTC) + timedelta(days=3),
    )
    for _ in range(4):
        keeper.run_once()
    grains = database.run("SELECT grain, attempts FROM delivery_counts ORDER BY grain")
    assert grains == [{"grain": "total", "attempts": 3}]
    marks = database.run("SELECT attempts, ended FROM delivery_marks")
    assert marks == [{"attempts": 3, "ended": 3}]  # the hour's mark of the totals
    after = scrape(api)
    assert after[key] == 3
    finished = ("te_executions_finished_last_minute", (("status", "SUCCESS"),))
    assert after[finished] == 0  # no longer in the window


def test_cron_ticks_and_reclaims_are_counted_across_schedulers(
    api: ApiClient, database: Database
) -> None:
    f.endpoint(database, "a")
    cron = {"endpoint": "a", "trigger": "CRON", "cron": "* * * * *", "timezone": "UTC"}
    assert api.post("/jobs", cron).status == 201
    ahead = datetime.now(UTC) + timedelta(minutes=3)
    # Two schedulers over the same due job: ticks are counted once each, by the winner.
    first = CronMaterializer(database, clock=lambda: ahead).run_once()
    second = CronMaterializer(database, clock=lambda: ahead).run_once()
    assert first.count >= 1 and second.count == 0

    stuck = [job(api, "a", f"s{n}") for n in range(2)]
    long_ago = datetime.now(UTC) - timedelta(hours=1)
    for execution_id in stuck:
        f.set_execution(
            database,
            execution_id,
            status="RUNNING",
            worker_id="lost",
            attempt_count=1,
            started_at=long_ago,
            lease_expires_at=long_ago,
        )
    assert len(StuckReclaimer(database, timeout_sec=60).reclaim()) == 2
    assert StuckReclaimer(database, timeout_sec=60).reclaim() == []

    # The materializer's rows are stamped with its (future) clock; the window is "now".
    database.execute("UPDATE metric_events SET recorded_at = now()")
    found = scrape(api)
    assert found[("te_cron_ticks_materialized_last_minute", ())] == first.count
    assert found[("te_executions_reclaimed_last_minute", ())] == 2


def test_the_housekeeper_prunes_metric_events_older_than_a_day(database: Database) -> None:
    now = datetime.now(UTC)
    for age in (timedelta(days=2), timedelta(minutes=1)):
        database.execute(
            "INSERT INTO metric_events (event, recorded_at, amount) VALUES ('reclaimed', :t, 1)",
            t=now - age,
        )
    Housekeeper(database, retention_days=0, clock=lambda: now).run_once()
    left = database.run("SELECT recorded_at FROM metric_events")
    assert [r["recorded_at"] for r in left] == [now - timedelta(minutes=1)]


def test_metric_events_refuse_unknown_events_and_empty_counts(database: Database) -> None:
    from chalicelib.errors import DatabaseError

    for event, amount in (("other", 1), ("reclaimed", 0)):
        with pytest.raises(DatabaseError):
            database.execute(
                "INSERT INTO metric_events (event, recorded_at, amount) VALUES (:e, now(), :n)",
                e=event,
                n=amount,
            )


@pytest.mark.parametrize(
    ("name", "params", "expected"),
    [
        (
            "metrics_snapshot",
            {
                "now": "2026-01-01T00:00:00Z",
                "buckets_since": "2026-01-01T00:00:00Z",
                "until": "2026-01-02T00:00:00Z",
                "window_since": "2026-01-01T00:00:00Z",
                "fresh_since": "2026-01-01T00:00:00Z",
            },
            {
                "pk_delivery_counts",
                "pk_metric_events",
                "idx_executions_pending",
                "idx_executions_due_by_endpoint",
                "idx_executions_running",
                "idx_region_heartbeats_beat",
            },
        ),
        ("metrics_oldest_due", {"now": "2026-01-01T00:00:00Z"}, {"idx_executions_pending"}),
        # GET /overview (the dashboard, polled every few seconds), one statement too.
        (
            "overview_snapshot",
            {
                "now": "2026-01-02T00:00:00Z",
                "until": "2026-01-02T00:00:00Z",
                "health_since": "2026-01-01T00:00:00Z",
                "cancelled_since": "2026-01-01T00:00:00Z",
                "series_since": "2026-01-01T23:00:00Z",
                "workers_since": "2026-01-01T23:00:00Z",
            },
            {
                "pk_delivery_counts",
                "pk_delivery_marks",
                "idx_executions_pending",
                "idx_executions_running",
                "idx_executions_cancelled",
            },
        ),
    ],
)
def test_each_metrics_query_reads_an_index_not_the_history(
    database: Database, name: str, params: dict[str, str], expected: set[str]
) -> None:
    used = indexes_used(database, name, **params)
    assert used >= expected, used


def seed_cron_jobs(database: Database, like_job: str, n: int, *, next_in: str) -> None:
    """``n`` active cron jobs like ``like_job``'s endpoint, next tick ``next_in`` from now
    (negative: overdue), so the lag's cron probe has a table to be bounded in."""
    database.execute(
        "INSERT INTO jobs (endpoint, endpoint_type, trigger_type, input, cron_expression,"
        " cron_timezone, cron_next_run_at, endpoint_snapshot)"
        " SELECT j.endpoint, j.endpoint_type, 'CRON', j.input, '* * * * *', 'UTC',"
        " now() + CAST(:next_in AS INTERVAL), j.endpoint_snapshot"
        " FROM jobs AS j, generate_series(1, :n) WHERE j.job_id = :job",
        job=like_job,
        n=n,
        next_in=next_in,
    )


def test_the_delivery_figures_read_a_bounded_range_under_both_plans(database: Database) -> None:
    """The statements /metrics, /overview and the queue_health line read, prepared as the
    service runs them, with the custom and the forced generic plan, over a history of
    5,000 ended executions, due backlogs of 2,000 (an endpoint's waiting, a held endpoint's
    parked, a paused endpoint's parked) and two days of summary rows: none reads a table
    sequentially, the lag probes read the head of each backlog and no more, and the
    windowed figures read only their window's summary rows."""
    busy = seed(database, spec=http_spec("http://127.0.0.1:9/"), count=1)
    paused = seed(database, spec=http_spec("http://127.0.0.1:9/"), count=1)
    late = seed(database, spec=http_spec("http://127.0.0.1:9/"), count=1)
    held = seed(database, spec=http_spec("http://127.0.0.1:9/"), count=1)
    seed_cron_jobs(database, busy.job_id, 2000, next_in="1 hour")
    for job, status, n, age in (
        (busy, "SUCCESS", 5000, "1 day"),
        (paused, "QUEUED", 2000, "1 hour"),
        (late, "QUEUED", 2000, "1 hour"),
        (held, "QUEUED", 2000, "1 hour"),
    ):
        database.execute(
            "INSERT INTO executions (job_id, endpoint, endpoint_type, status, run_at,"
            " created_at, completed_at)"
            " SELECT :job, :endpoint, 'HTTP', :status, now() - CAST(:age AS INTERVAL),"
            " now() - CAST(:age AS INTERVAL),"
            " CASE WHEN :status = 'SUCCESS' THEN now() - CAST(:age AS INTERVAL) END"
            " FROM generate_series(1, :n)",
            job=job.job_id,
            endpoint=job.endpoint,
            status=status,
            n=n,
            age=age,
        )
    database.execute("UPDATE endpoints SET paused_at = now() WHERE name = :n", n=paused.endpoint)
    # As the promoter leaves a paused backlog: parked, out of the claim's index (the
    # oldest-due probe walks that index's head, as the claim does).
    # A held endpoint's backlog is parked too, and is lag (it is not paused).
    for endpoint in (paused.endpoint, held.endpoint):
        database.execute(
            "UPDATE executions SET parked = TRUE WHERE endpoint = :n AND status = 'QUEUED'",
            n=endpoint,
        )
        database.execute("UPDATE endpoints SET parked_rows = TRUE WHERE name = :n", n=endpoint)
    # The summary rows as the housekeeper keeps them (migration 019), for 20 endpoints:
    # three minutes of each of 10 writers' rows not rolled up yet, two hours of series
    # rows, the totals, and two days of hourly marks.
    database.execute(
        "INSERT INTO delivery_counts (grain, bucket_start, endpoint, outcome, error_type,"
        " writer, attempts, ended, duration_ms, le_10, le_50, le_100, le_250, le_500,"
        " le_1000, le_5000, le_30000)"
        " SELECT DISTINCT ON (1, 2, 3, 6) g.grain,"
        " CASE WHEN g.grain = 'total' THEN TIMESTAMPTZ '1970-01-01Z'"
        "   ELSE date_trunc('minute', now()) - s * INTERVAL '1 minute' END,"
        " CASE WHEN g.grain = 'series' THEN '' ELSE :endpoint || e END, 'SUCCESS', '',"
        " CASE WHEN g.grain = 'minute' THEN 'w' || w ELSE 'fold' END,"
        " 1, 1, 5, 1, 1, 1, 1, 1, 1, 1, 1"
        " FROM (VALUES ('minute', 2, 10), ('series', 119, 1), ('total', 0, 1))"
        "   AS g (grain, n, writers)"
        " CROSS JOIN LATERAL generate_series(0, g.n) AS s"
        " CROSS JOIN LATERAL generate_series(1, g.writers) AS w"
        " CROSS JOIN generate_series(1, 20) AS e",
        endpoint=busy.endpoint,
    )
    database.execute(
        "INSERT INTO delivery_marks (hour, endpoint, outcome, attempts, ended)"
        " SELECT date_trunc('hour', now()) - h * INTERVAL '1 hour', :endpoint || e,"
        " 'SUCCESS', 1, 1 FROM generate_series(0, 48) AS h, generate_series(1, 20) AS e",
        endpoint=busy.endpoint,
    )
    database.execute("ANALYZE")
    now = datetime.now(UTC)
    minute = now.replace(second=0, microsecond=0)
    summary = int(database.run("SELECT count(*) AS n FROM delivery_counts")[0]["n"])
    # GET /metrics, one statement: the live probes (an index probe or two per endpoint
    # that is not paused, the oldest due execution in a few, the RUNNING rows: none), the
    # window's CANCELLED rows (none), and three reads of the summary rows (the window's
    # minutes, the counters), never a mark or the history.
    snapshot = {
        "now": now,
        "buckets_since": minute - timedelta(minutes=1),
        "until": now,
        "window_since": now - timedelta(minutes=1),
        "fresh_since": now - timedelta(seconds=15),
    }
    for plan in bounded(
        database,
        queries["metrics_snapshot"],
        snapshot,
        at_most=10,
        tables=("executions", "delivery_marks"),
    ):
        assert plan.read()["delivery_counts"] <= 3 * summary, plan
    bounded(database, queries["metrics_oldest_due"], {"now": now}, at_most=10)
    # GET /overview, one statement: a day's health (one hour's marks, and the totals and
    # the rows not rolled up yet: a row per endpoint and three minutes of writers; the
    # summary table is what the housekeeper keeps, so reading it whole is bounded), the
    # dashboard's hour (the window's summary rows, or the table whole), the live probes
    # and the day's cancellations (none), never two days of marks or the history.
    for plan in bounded(
        database,
        queries["overview_snapshot"],
        {
            "now": now,
            "until": now,
            "health_since": now - timedelta(hours=24),
            "cancelled_since": now - timedelta(hours=24),
            "series_since": minute - timedelta(minutes=59),
            "workers_since": now - timedelta(hours=1),
        },
        at_most=21,
        tables=("delivery_marks", "executions"),
    ):
        assert plan.read()["delivery_counts"] <= 2 * summary, plan


def test_the_lag_probes_read_one_head_where_most_endpoints_have_one_due_row(
    database: Database,
) -> None:
    """Statistics that expect a row or so per endpoint (400 endpoints with one due row
    each) beside one endpoint with a due backlog of 3,000: under both plans each lag probe
    reads the head of its endpoint's range. A plan that read an endpoint's due rows on
    idx_executions_by_endpoint (keyed by endpoint, in created_at order) and sorted them by
    run_at would look cheap for a row or two and read the whole backlog of the one big
    endpoint, on every scrape."""
    big = seed(database, spec=http_spec("http://127.0.0.1:9/"), count=1)
    database.execute(
        "INSERT INTO endpoints (name, endpoint_type, spec)"
        " SELECT 'few-' || g, 'HTTP', CAST(:spec AS JSONB) FROM generate_series(1, 400) AS g",
        spec='{"url": "http://127.0.0.1:9/", "method": "POST"}',
    )
    rows = (
        "INSERT INTO executions (job_id, endpoint, endpoint_type, status, run_at, created_at)"
        " SELECT :job, {endpoint}, 'HTTP', 'QUEUED', now() - g * INTERVAL '1 second',"
        " now() - g * INTERVAL '1 second' FROM generate_series(1, :n) AS g"
    )
    database.execute(rows.format(endpoint="'few-' || g"), job=big.job_id, n=400)
    database.execute(rows.format(endpoint=":big"), job=big.job_id, n=3000, big=big.endpoint)
    database.execute("ANALYZE")
    now = datetime.now(UTC)
    bounded(
        database,
        queries["metrics_snapshot"],
        {
            "now": now,
            "buckets_since": now.replace(second=0, microsecond=0) - timedelta(minutes=1),
            "until": now,
            "window_since": now - timedelta(minutes=1),
            "fresh_since": now - timedelta(seconds=15),
        },
        at_most=450,  # a row per endpoint's probe, and the few heads of the oldest due
        tables=("executions",),
    )


def test_the_overviews_lag_is_every_endpoints_oldest_in_a_few_probes(database: Database) -> None:
    """The oldest due execution (metrics_oldest_due: the lag of /overview, /metrics and the
    queue_health line) is the minimum of each endpoint's (metrics_endpoint_lag) and of the
    due PENDING rows, read in a few probes: a held endpoint's parked backlog
    counts, a paused one's does not, parked or not yet parked; and under both plans it
    reads a few rows, not the paused backlog or the history."""
    now = datetime.now(UTC)
    ready, held, paused, history = (
        seed(database, spec=http_spec("http://127.0.0.1:9/"), count=1) for _ in range(4)
    )
    seed_cron_jobs(database, history.job_id, 2000, next_in="1 hour")
    for job, status, parked, n, ago in (
        (history, "SUCCESS", False, 5000, "1 day"),
        (ready, "QUEUED", False, 3, "5 minutes"),
        (held, "QUEUED", True, 3, "10 minutes"),
        (paused, "QUEUED", True, 2000, "2 hours"),
        (paused, "RETRYING", False, 1, "3 hours"),  # not parked yet
        (ready, "PENDING", False, 2, "-1 hour"),  # not due
    ):
        database.execute(
            "INSERT INTO executions (job_id, endpoint, endpoint_type, status, parked, run_at,"
            " created_at, completed_at)"
            " SELECT :job, :endpoint, 'HTTP', :status, :parked,"
            " CAST(:now AS TIMESTAMPTZ) - CAST(:ago AS INTERVAL),"
            " CAST(:now AS TIMESTAMPTZ) - CAST(:ago AS INTERVAL),"
            " CASE WHEN :status = 'SUCCESS' THEN now() END"
            " FROM generate_series(1, :n)",
            job=job.job_id,
            endpoint=job.endpoint,
            status=status,
            parked=parked,
            n=n,
            ago=ago,
            now=now,
        )
    database.execute(
        "UPDATE endpoints SET parked_rows = TRUE,"
        " paused_at = CASE WHEN name = :p THEN now() END WHERE name IN (:h, :p)",
        h=held.endpoint,
        p=paused.endpoint,
    )
    database.execute("ANALYZE")

    def oldest() -> datetime | None:
        [row] = database.run(queries["metrics_oldest_due"], now=now)
        return row["oldest_run_at"]

    def per_endpoint() -> datetime | None:
        snap = MetricsService(database, lambda: now).snapshot()
        lags = [now - timedelta(seconds=s) for _, s in snap.endpoint_lag_sec if s > 0]
        [pending] = database.run(
            "SELECT min(run_at) AS oldest_run_at FROM executions"
            " WHERE status = 'PENDING' AND run_at <= :now",
            now=now,
        )
        return min((at for at in [*lags, pending["oldest_run_at"]] if at is not None), default=None)

    assert oldest() == per_endpoint() == now - timedelta(minutes=10)  # the held backlog
    bounded(database, queries["metrics_oldest_due"], {"now": now}, at_most=10)

    # A due PENDING row not promoted yet is older still; unpausing brings the paused
    # backlog's rows in, parked or not.
    database.execute(
        "UPDATE executions SET run_at = CAST(:at AS TIMESTAMPTZ) WHERE endpoint = :e"
        " AND status = 'PENDING'",
        at=now - timedelta(minutes=20),
        e=ready.endpoint,
    )
    assert oldest() == now - timedelta(minutes=20)
    database.execute("UPDATE endpoints SET paused_at = NULL WHERE name = :p", p=paused.endpoint)
    assert oldest() == per_endpoint() == now - timedelta(hours=3)
    # A cron tick nobody materialized (no scheduler runs) is due work too; a paused cron
    # job's is not (the materializer passes it over).
    database.execute(
        "UPDATE jobs SET cron_next_run_at = CAST(:at AS TIMESTAMPTZ), paused_at = now()"
        " WHERE job_id = (SELECT min(job_id) FROM jobs WHERE trigger_type = 'CRON')",
        at=now - timedelta(hours=5),
    )
    assert oldest() == now - timedelta(hours=3)
    database.execute(
        "UPDATE jobs SET cron_next_run_at = CAST(:at AS TIMESTAMPTZ)"
        " WHERE job_id = (SELECT max(job_id) FROM jobs WHERE trigger_type = 'CRON')",
        at=now - timedelta(hours=4),
    )
    assert oldest() == now - timedelta(hours=4)
    bounded(database, queries["metrics_oldest_due"], {"now": now}, at_most=10)
