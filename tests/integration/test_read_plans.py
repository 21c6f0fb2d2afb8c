"""The API's reads cost a page, not the history or the whole backlog, with the plan a
prepared statement starts with and with the generic plan it may switch to after five runs
(tests/support/plans.py): every filter shape of GET /jobs and GET /executions, a
job's executions deep in the cursor, a job's status counts and window, queue position.

The seeded history is larger than any bound asserted here, and the live backlogs are old
(created before the history), so a plan that walks history or reads a backlog whole to
find the newest rows breaks the bound.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest

from chalicelib.db.connection import Database
from chalicelib.db.queries import queries
from chalicelib.db.shapes import shaped
from chalicelib.domain.dead_letters import ExecutionFilter
from chalicelib.domain.pagination import PageRequest
from chalicelib.domain.statuses import ExecutionStatus
from chalicelib.services import dead_letters
from chalicelib.services.executions import QUEUE_POSITION_MAX_AHEAD
from chalicelib.services.jobs import service as jobs
from tests.support.api_client import ApiClient
from tests.support.plans import bounded
from tests.support.seed.worker import http_spec, seed

HISTORY = 20_000  #: ended one-shot jobs (one execution each), and ticks of the cron job
BACKLOG = 2_000  #: QUEUED executions, and PENDING ones, all older than the history
RUNNING = 500  #: RUNNING executions (one-shot)
#: Rows any table may give one listing: a few pages (arms of 51 rows, their probes).
PAGES = 1_000


@dataclass(frozen=True)
class History:
    endpoint: str  #: the cron job's endpoint, half of the one-shot history
    other: str  #: the backlogs' endpoint, the other half
    rare: str  #: an endpoint with one execution in all the history
    cron_job: str
    deep: tuple[datetime, str]  #: a job cursor in the middle of the history
    deep_execution: tuple[datetime, str]  #: its execution's
    deep_tick: tuple[datetime, str]  #: a cursor 10,000 ticks deep in the cron job
    last_queued: tuple[datetime, str]  #: (run_at, id) of the last of the QUEUED backlog


SEED = [
    # One-shot history: a job and its ended execution, alternately on each endpoint, a
    # quarter DELAYED; a tenth FAILED (HTTP_ERROR, three RARE), some CANCELLED.
    """INSERT INTO jobs (job_id, endpoint, endpoint_type, trigger_type, created_at)
       SELECT 'job_h' || g, CASE WHEN g % 2 = 0 THEN :endpoint ELSE :other END, 'HTTP',
              CASE WHEN g % 4 = 0 THEN 'DELAYED' ELSE 'IMMEDIATE' END,
              now() - INTERVAL '1 hour' - g * INTERVAL '1 second'
       FROM generate_series(1, :history) AS g""",
    """INSERT INTO executions (execution_id, job_id, endpoint, endpoint_type, status,
                               attempt_count, created_at, run_at, completed_at,
                               last_error_type)
       SELECT 'exec_h' || g, j.job_id, j.endpoint, 'HTTP',
              CASE WHEN g % 10 = 0 THEN 'FAILED' WHEN g % 33 = 0 THEN 'CANCELLED'
                   ELSE 'SUCCESS' END,
              1, j.created_at, j.created_at, j.created_at + INTERVAL '1 second',
              CASE WHEN g IN (10, 5000, 15000) THEN 'RARE'
                   WHEN g % 10 = 0 THEN 'HTTP_ERROR' END
       FROM generate_series(1, :history) AS g JOIN jobs AS j ON j.job_id = 'job_h' || g""",
    """INSERT INTO attempts (execution_id, attempt_number, status, started_at, completed_at,
                             error)
       SELECT execution_id, 1, 'FAILED', created_at, completed_at,
              jsonb_build_object('type', last_error_type, 'message', 'm')
       FROM executions WHERE status = 'FAILED'""",
    # The backlogs, older than the history: QUEUED (due; half of them DELAYED jobs already
    # promoted), PENDING (DELAYED, due in a day), a few RETRYING, and as many RUNNING as a
    # few busy workers hold (enough that joining them to jobs by a hash would read every job).
    """INSERT INTO jobs (job_id, endpoint, endpoint_type, trigger_type, created_at)
       SELECT 'job_' || s || g, :other, 'HTTP',
              CASE WHEN s = 'p' OR g % 2 = 0 THEN 'DELAYED' ELSE 'IMMEDIATE' END,
              now() - INTERVAL '40 days' - g * INTERVAL '1 second'
       FROM generate_series(1, :backlog) AS g,
            unnest(CAST('{q,p,r,x}' AS TEXT[])) AS s
       WHERE s IN ('q', 'p') OR (s = 'r' AND g <= 20) OR (s = 'x' AND g <= :running)""",
    """INSERT INTO executions (execution_id, job_id, endpoint, endpoint_type, status,
                               attempt_count, created_at, run_at, started_at,
                               last_error_type)
       SELECT 'exec_' || substr(j.job_id, 5), j.job_id, j.endpoint, 'HTTP',
              CASE substr(j.job_id, 5, 1) WHEN 'q' THEN 'QUEUED' WHEN 'p' THEN 'PENDING'
                   WHEN 'r' THEN 'RETRYING' ELSE 'RUNNING' END,
              CASE WHEN substr(j.job_id, 5, 1) IN ('r', 'x') THEN 1 ELSE 0 END,
              j.created_at,
              CASE WHEN substr(j.job_id, 5, 1) = 'p' THEN now() + INTERVAL '1 day'
                   ELSE j.created_at END,
              CASE WHEN substr(j.job_id, 5, 1) = 'x' THEN now() END,
              CASE WHEN substr(j.job_id, 5, 1) = 'r' THEN 'TIMEOUT' END
       FROM jobs AS j WHERE j.created_at < now() - INTERVAL '30 days'""",
    # The cron job: ACTIVE for 60 days, a tick every 10 s of history (the last 24 hours
    # hold 8,640), plus 5 due ticks and 2 running; ten more ACTIVE cron jobs.
    """INSERT INTO jobs (job_id, endpoint, endpoint_type, trigger_type, cron_expression,
                         cron_timezone, cron_next_run_at, created_at)
       SELECT CASE WHEN g = 0 THEN :cron_job ELSE 'job_cron' || g END,
              CASE WHEN g = 0 THEN :endpoint ELSE :other END, 'HTTP', 'CRON', '* * * * *',
              'UTC', now() + INTERVAL '1 minute', now() - INTERVAL '60 days' + g * INTERVAL '1 s'
       FROM generate_series(0, 10) AS g""",
    """INSERT INTO executions (execution_id, job_id, endpoint, endpoint_type, idempotency_key,
                               status, attempt_count, created_at, run_at, started_at,
                               completed_at, duration_ms)
       SELECT 'exec_t' || g, :cron_job, :endpoint, 'HTTP', 'tick:' || g,
              CASE WHEN g <= 5 THEN 'QUEUED' WHEN g <= 7 THEN 'RUNNING' ELSE 'SUCCESS' END,
              CASE WHEN g <= 5 THEN 0 ELSE 1 END,
              now() - g * INTERVAL '10 seconds', now() - g * INTERVAL '10 seconds',
              CASE WHEN g > 5 THEN now() - g * INTERVAL '10 seconds' END,
              CASE WHEN g > 7 THEN now() - g * INTERVAL '10 seconds' + INTERVAL '1 s' END,
              CASE WHEN g > 7 THEN 1000 END
       FROM generate_series(1, :history) AS g""",
    "ANALYZE",
]


@pytest.fixture
def history(database: Database) -> History:
    endpoint = seed(database, spec=http_spec("http://127.0.0.1:9/"), count=1).endpoint
    other = seed(database, spec=http_spec("http://127.0.0.1:9/"), count=1).endpoint
    rare = seed(database, spec=http_spec("http://127.0.0.1:9/"), count=1)
    database.run(
        "UPDATE executions SET status = 'SUCCESS', created_at = now() - INTERVAL '50 days'"
        " WHERE execution_id = :id",
        id=rare.execution_id,
    )
    params = {
        "endpoint": endpoint,
        "other": other,
        "cron_job": "job_cronmain",
        "history": HISTORY,
        "backlog": BACKLOG,
        "running": RUNNING,
    }
    for statement in SEED:
        named = {k: v for k, v in params.items() if f":{k}" in statement}
        database.run(statement, **named)

    def key(sql: str, **params: Any) -> tuple[datetime, str]:
        row = database.run(sql, **params)[0]
        return row["at"], row["id"]

    return History(
        endpoint=endpoint,
        other=other,
        rare=rare.endpoint,
        cron_job="job_cronmain",
        deep=key("SELECT created_at AS at, job_id AS id FROM jobs WHERE job_id = 'job_h10000'"),
        deep_execution=key(
            "SELECT created_at AS at, execution_id AS id FROM executions"
            " WHERE execution_id = 'exec_h10000'"
        ),
        deep_tick=key(
            "SELECT created_at AS at, execution_id AS id FROM executions"
            " WHERE execution_id = 'exec_t10000'"
        ),
        last_queued=key(
            "SELECT run_at AS at, execution_id AS id FROM executions WHERE status = 'QUEUED'"
            " ORDER BY run_at DESC, execution_id DESC LIMIT 1"
        ),
    )


def test_every_shape_of_the_jobs_list_reads_a_few_pages(
    database: Database, history: History
) -> None:
    shapes = itertools.product(
        (None, "ACTIVE", "RETIRED"),
        (None, "IMMEDIATE", "DELAYED", "CRON"),
        (None, history.endpoint, history.rare),
        (PageRequest(limit=50), PageRequest(50, *history.deep)),
    )
    for status, trigger, endpoint, page in shapes:
        filters = {"endpoint": endpoint, "trigger_type": trigger, "status": status}
        query, params = jobs.list_query(filters, page)
        bounded(database, query, params, at_most=PAGES, tables=("executions", "jobs"))


def test_the_active_jobs_are_the_newest_live_ones(database: Database, history: History) -> None:
    """What the arms find is the page jobs_list would find, in its order, with a cursor."""
    for trigger in (None, "IMMEDIATE", "DELAYED", "CRON"):
        filters = {"endpoint": None, "trigger_type": trigger, "status": "ACTIVE"}
        query, params = jobs.list_query(filters, PageRequest(limit=30))
        got = [r["job_id"] for r in database.run(query, **params)]
        expected = database.run(
            "SELECT job_id FROM job_states WHERE status = 'ACTIVE'"
            " AND (CAST(:t AS TEXT) IS NULL OR trigger_type = :t)"
            " ORDER BY created_at DESC, job_id DESC LIMIT 31",
            t=trigger,
        )
        assert got == [r["job_id"] for r in expected], trigger


def execution_filters(history: History) -> list[ExecutionFilter]:
    every = tuple(s.value for s in ExecutionStatus)
    since = datetime.now().astimezone() - timedelta(days=3)
    until = datetime.now().astimezone() - timedelta(hours=2)
    out = []
    for statuses, endpoint, error_type, (lo, hi) in itertools.product(
        [every, *[(s,) for s in every]],
        (None, history.endpoint, history.rare),
        (None, "HTTP_ERROR", "RARE", "ABSENT"),
        ((None, None), (since, None), (None, until), (since, until)),
    ):
        out.append(
            ExecutionFilter(
                statuses=statuses, endpoint=endpoint, since=lo, until=hi, error_type=error_type
            )
        )
    return out


def test_every_shape_of_the_executions_list_reads_a_few_pages(
    database: Database, history: History
) -> None:
    deep = PageRequest(50, *history.deep_execution)
    for filters, page in itertools.product(
        execution_filters(history), (PageRequest(limit=50), deep)
    ):
        query, params = dead_letters.list_query(filters, page)
        # Known limits: an error type AND an endpoint read the endpoint's executions of each
        # status asked for until a page has that type (its history, not everyone's; no index
        # is keyed by both), and an endpoint's successes are read among everyone's (an
        # index entry per success costs every delivery: migration 020), so an endpoint
        # with a small share of them reads far into the history.
        both = filters.endpoint is not None and filters.error_type is not None
        if filters.endpoint == history.rare and "SUCCESS" in filters.statuses:
            continue  # the second known limit: the plan reads everyone's successes
        bounded(database, query, params, at_most=2 * HISTORY if both else PAGES)


def test_a_page_deep_in_a_jobs_executions_reads_a_page(
    database: Database, history: History
) -> None:
    for status in (None, "SUCCESS"):
        for page in (PageRequest(limit=50), PageRequest(50, *history.deep_tick)):
            params = {"job_id": history.cron_job, "status": status, **page.params()}
            query, params = shaped(queries["executions_list_for_job"], params)
            bounded(database, query, params, at_most=60)


def test_a_jobs_versions_are_walked_on_an_index(database: Database, history: History) -> None:
    """GET /jobs/{id}/versions follows previous_version_id forward one version at a time:
    each step is an index probe (idx_jobs_previous_version), not a read of every job."""
    database.run(
        "INSERT INTO jobs (job_id, endpoint, endpoint_type, trigger_type, status, version,"
        " previous_version_id, cron_expression, cron_timezone)"
        " SELECT 'job_v' || g, :endpoint, 'HTTP', 'CRON', 'RETIRED', g + 1,"
        " CASE WHEN g = 1 THEN :root ELSE 'job_v' || (g - 1) END, '* * * * *', 'UTC'"
        " FROM generate_series(1, 3) AS g",
        endpoint=history.endpoint,
        root=history.cron_job,
    )
    database.run("ANALYZE jobs")
    params = {"root_id": history.cron_job, "after_id": None, "limit_plus_one": 51}
    bounded(database, queries["jobs_version_chain"], params, at_most=20, tables=("jobs",))
    chain = database.run(queries["jobs_version_chain"].sql, **params)
    assert [r["job_id"] for r in chain] == [history.cron_job, "job_v1", "job_v2", "job_v3"]


def test_a_cron_jobs_status_reads_what_is_live_and_a_capped_window(
    database: Database, history: History
) -> None:
    counts = database.run(
        queries["jobs_active_counts_cron"].sql, job_id=history.cron_job, max_rows=1_000
    )
    assert counts == [{"pending": 5, "running": 2}]
    # At most its newest 1,000 ticks: never its history, the deployment's PENDING backlog
    # or its endpoint's due rows (a cron job's executions are never PENDING).
    bounded(
        database,
        queries["jobs_active_counts_cron"],
        {"job_id": history.cron_job, "max_rows": 1_000},
        at_most=1_000,
    )
    since = datetime.now().astimezone() - timedelta(hours=24)
    window = {"job_id": history.cron_job, "since": since, "max_rows": 100}
    bounded(database, queries["jobs_window_stats"], window, at_most=100)
    assert database.run(queries["jobs_window_stats"].sql, **window)[0]["total"] == 100


def test_queue_position_counts_at_most_its_cap(database: Database, history: History) -> None:
    run_at, execution_id = history.last_queued
    params = {"run_at": run_at, "execution_id": execution_id, "max_ahead": 100}
    bounded(database, queries["executions_queue_position"], params, at_most=100)
    assert database.run(queries["executions_queue_position"].sql, **params)[0]["position"] == 101
    params["max_ahead"] = QUEUE_POSITION_MAX_AHEAD * 10
    exact = database.run(queries["executions_queue_position"].sql, **params)[0]["position"]
    due = database.run(
        "SELECT count(*) AS n FROM executions"
        " WHERE status IN ('QUEUED', 'RETRYING') AND run_at <= now()"
    )[0]["n"]
    assert exact == due > QUEUE_POSITION_MAX_AHEAD  # the last: every other due row is ahead


def test_the_api_reports_a_deep_queue_position_as_its_cap_plus_one(
    api: ApiClient, history: History
) -> None:
    """Past QUEUE_POSITION_MAX_AHEAD executions ahead, GET /executions/{id} stops counting:
    1001 reads "at least 1,001" (the OpenAPI description says so); near the head it is exact."""
    last = api.get(f"/executions/{history.last_queued[1]}").body
    assert (last["status"], last["queue_position"]) == ("QUEUED", QUEUE_POSITION_MAX_AHEAD + 1)
    first = api.get("/executions/exec_q" + str(BACKLOG)).body  # the oldest run_at
    assert (first["status"], first["queue_position"]) == ("QUEUED", 1)


def test_a_job_found_by_its_key_is_one_probe_of_the_key_index(
    database: Database, history: History
) -> None:
    """GET /jobs?endpoint=&idempotency_key= (and a repeated POST /jobs) read the one job
    holding the key on idx_jobs_idempotency, whatever the history."""
    database.run("UPDATE jobs SET idempotency_key = 'key-' || job_id WHERE job_id LIKE 'job_h%'")
    database.run("ANALYZE jobs")
    params = {"pairs": json.dumps([{"endpoint": history.endpoint, "key": "key-job_h10000"}])}
    query = queries["jobs_find_by_idempotency_keys"]
    for plan in bounded(database, query, params, at_most=5, tables=("jobs", "executions")):
        assert "idx_jobs_idempotency" in plan.indexes(), plan
    [row] = database.run(query.sql, **params)
    assert row["job_id"] == "job_h10000"
