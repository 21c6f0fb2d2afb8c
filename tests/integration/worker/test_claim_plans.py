"""The claim's plans read a claim's worth of rows, with the plan made for the values and with
the generic one the worker's PostgreSQL sessions keep (``plan_cache_mode =
force_generic_plan``: ``wiring.process.PLAN_CACHE_MODE``), on the history that traps a
generic plan: one endpoint holding every due row (its statistics then say no row passes
``endpoint <> ALL(<unknown>)``), a large backlog, a large ended history.

Plans are judged by rows read (tests/support/plans.py), never by time.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from chalicelib.db.connection import Database
from chalicelib.db.queries import Query, queries
from chalicelib.db.shapes import shaped
from tests.support.plans import bounded, metered_claim_params
from tests.support.seed.worker import http_spec, seed

pytestmark = pytest.mark.claim_path

BACKLOG = 5_000  #: due QUEUED executions, all of one endpoint
HISTORY = 20_000  #: ended executions of the same endpoint
BATCH = 20
#: A claim of BATCH reads its candidates, their rows, jobs and endpoints: a few per row.
AT_MOST = 5 * BATCH


@pytest.fixture
def backlog(database: Database) -> str:
    """One endpoint's backlog and history, a job per execution as POST /jobs writes them;
    other endpoints exist, without a single execution (so the statistics say one endpoint)."""
    seeded = seed(database, spec=http_spec("http://127.0.0.1:9/"), count=1)
    for _ in range(20):
        seed(database, spec=http_spec("http://127.0.0.1:9/"), count=1)
    for table in ("execution_logs", "executions"):  # the other endpoints: nothing at all
        database.run(
            f"DELETE FROM {table} WHERE execution_id IN"
            " (SELECT execution_id FROM executions WHERE endpoint <> :e)",
            e=seeded.endpoint,
        )
    database.run(
        "INSERT INTO jobs (job_id, endpoint, endpoint_type, trigger_type, endpoint_snapshot)"
        " SELECT 'job_b' || g, :endpoint, 'HTTP', 'IMMEDIATE', j.endpoint_snapshot"
        " FROM generate_series(1, :total) AS g, jobs AS j WHERE j.job_id = :job",
        job=seeded.job_id,
        endpoint=seeded.endpoint,
        total=BACKLOG + HISTORY,
    )
    database.run(
        "INSERT INTO executions (job_id, endpoint, endpoint_type, status, run_at, created_at,"
        "                        completed_at)"
        " SELECT 'job_b' || g, :endpoint, 'HTTP', CASE WHEN g <= :backlog THEN 'QUEUED'"
        " ELSE 'SUCCESS' END, now() - INTERVAL '1 hour' + g * INTERVAL '1 ms',"
        " now() - INTERVAL '2 hours', CASE WHEN g > :backlog THEN now() - INTERVAL '1 hour' END"
        " FROM generate_series(1, :total) AS g",
        endpoint=seeded.endpoint,
        backlog=BACKLOG,
        total=BACKLOG + HISTORY,
    )
    database.run("ANALYZE")
    return seeded.endpoint


def _fairness() -> dict[str, object]:
    return {
        "default_cap": BATCH,
        "full": [],
        "busy": json.dumps({}),
        "pending": 0,
    }


def _capped(endpoint: str) -> dict[str, object]:
    """A claim's parameters while ``endpoint`` is at its cap on this worker (the shape that
    takes the other endpoints' oldest rows), for each statement that claims."""
    return {
        "batch": BATCH,
        "worker_id": "w1",
        "lease_ms": 300_000,
        "default_cap": BATCH,
        "full": [endpoint],
        "busy": json.dumps({endpoint: BATCH}),
        "pending": 0,
        "results": "[]",
        "writer": "w1/t",
    }


def _shape(name: str, params: dict[str, object]) -> tuple[Query, dict[str, object]]:
    """The statement the worker sends for ``params`` (``name``, or its ``_capped`` twin while
    an endpoint is at its cap: ``full`` names one), and the parameters it takes."""
    capped = "_capped" if params.get("full") else ""
    return shaped(queries[f"{name}{capped}"], params)


def _claims_a_batch_per_plan(
    database: Database, name: str, params: dict[str, object], endpoint: str
) -> None:
    """Both plans of the claim ``name`` read a batch's worth, and each takes a whole batch."""
    bounded(database, *_shape(name, params), at_most=AT_MOST, tables=("executions", "jobs"))
    claimed = database.run(
        "SELECT count(*) AS n FROM executions WHERE status = 'RUNNING' AND endpoint = :e",
        e=endpoint,
    )[0]["n"]
    assert claimed == 2 * BATCH  # a whole batch per plan, from the oldest of the backlog


def test_the_skip_locked_claim_reads_a_batch_with_either_plan(
    database: Database, backlog: str
) -> None:
    params = {"batch": BATCH, "worker_id": "w1", "lease_ms": 300_000, **_fairness()}
    _claims_a_batch_per_plan(database, "worker_claim_skip_locked", params, backlog)


def test_the_conditional_claim_reads_a_batch_with_either_plan(
    database: Database, backlog: str
) -> None:
    bounded(
        database,
        *_shape("worker_claim_candidates", {"batch": BATCH, **_fairness()}),
        at_most=AT_MOST,
        tables=("executions",),
    )
    ids = [
        row["execution_id"]
        for row in database.run(
            "SELECT execution_id FROM executions WHERE status = 'QUEUED' ORDER BY run_at LIMIT :n",
            n=BATCH,
        )
    ]
    bounded(
        database,
        queries["worker_claim_conditional"],
        {"ids": ids, "worker_id": "w1", "lease_ms": 300_000},
        at_most=AT_MOST,
        tables=("executions", "jobs"),
    )


def test_the_record_and_claim_reads_its_batch_and_a_claims_worth_with_either_plan(
    database: Database, backlog: str
) -> None:
    """worker_record_and_claim (PostgreSQL's record-and-refill): recording a batch reads the
    batch's rows, not the history; its claim reads a batch, as the claim alone does."""
    running = [
        row["execution_id"]
        for row in database.run(
            "UPDATE executions SET status = 'RUNNING', worker_id = 'w1', attempt_count = 1,"
            " started_at = now() WHERE execution_id IN (SELECT execution_id FROM executions"
            " WHERE status = 'QUEUED' ORDER BY run_at LIMIT :n) RETURNING execution_id",
            n=BATCH,
        )
    ]
    now = datetime.now(UTC).isoformat()
    results = [
        {
            "execution_id": execution_id,
            "attempt_number": 1,
            "attempt_status": "SUCCESS",
            "next_status": "SUCCESS",
            "started_at": now,
            "completed_at": now,
            "duration_ms": 2,
            "log_level": "INFO",
            "log_message": "Attempt 1 succeeded.",
            "output": {"status_code": 200},
        }
        for execution_id in running
    ]
    params = {
        "batch": BATCH,
        "worker_id": "w1",
        "lease_ms": 300_000,
        "results": json.dumps(results),
        "writer": "w1/t",
        **_fairness(),
    }
    bounded(
        database,
        *_shape("worker_record_and_claim", params),
        at_most=AT_MOST,
        tables=("executions", "jobs", "attempts"),
    )
    recorded = database.run(
        "SELECT count(*) AS n FROM attempts WHERE execution_id = ANY(:ids)", ids=running
    )[0]["n"]
    assert recorded == BATCH  # the first plan recorded them; the second found them moved


def test_the_metered_claim_reads_a_batch_with_either_plan(database: Database, backlog: str) -> None:
    """worker_claim_metered (flow-controlled endpoints, both strategies): with the backlog's
    endpoint under a concurrency limit, each plan reads the endpoint's oldest due rows up to a
    batch, its RUNNING ones for the limit and the batch's jobs, not the backlog or history."""
    params = metered_claim_params(database, backlog, BATCH)
    _claims_a_batch_per_plan(database, "worker_claim_metered", params, backlog)


@pytest.mark.parametrize(
    "name", ["worker_claim_skip_locked", "worker_claim_candidates", "worker_record_and_claim"]
)
def test_a_claim_past_an_endpoint_at_its_cap_does_not_read_a_backlog(
    database: Database, backlog: str, name: str
) -> None:
    """With the backlog's endpoint at its cap on this worker (a hung or lone busy endpoint:
    its 5,000 due rows at the head of idx_executions_due), a claim for the others (the
    reserve's, a refill) reads a few rows per endpoint under both plans: not that backlog,
    nor the whole backlog of another endpoint (2,000 rows, of which it takes the oldest);
    and it finds the work behind them."""
    other = seed(database, spec=http_spec("http://127.0.0.1:9/"), count=3)
    database.run(
        "UPDATE executions SET status = 'QUEUED', run_at = now() - INTERVAL '1 minute'"
        " WHERE endpoint = :e",
        e=other.endpoint,
    )
    deep = seed(database, spec=http_spec("http://127.0.0.1:9/"), count=1)
    database.run(
        "INSERT INTO executions (job_id, endpoint, endpoint_type, status, run_at)"
        " SELECT :job, :endpoint, 'HTTP', 'QUEUED', now() - g * INTERVAL '1 ms'"
        " FROM generate_series(1, 2000) AS g",
        job=deep.job_id,
        endpoint=deep.endpoint,
    )
    database.run("ANALYZE")
    params = _capped(backlog)
    for plan in bounded(
        database, *_shape(name, params), at_most=AT_MOST, tables=("executions", "jobs")
    ):
        if name == "worker_claim_candidates":  # read only: both plans find the same
            assert plan.root["Actual Rows"] == BATCH, plan
    if name != "worker_claim_candidates":
        taken = database.run(
            "SELECT endpoint, count(*) AS n FROM executions WHERE status = 'RUNNING'"
            " GROUP BY endpoint ORDER BY endpoint"
        )
        # The first plan took a batch: the other endpoint's three (the oldest), then the
        # oldest of the deep backlog; the second plan the next of the deep backlog.
        assert {r["endpoint"]: r["n"] for r in taken} == {
            other.endpoint: 3,
            deep.endpoint: 2 * BATCH - 3,
        }


ENDPOINTS = 30  #: endpoints with a due backlog besides the capped one


@pytest.mark.parametrize(
    "name", ["worker_claim_skip_locked", "worker_claim_candidates", "worker_record_and_claim"]
)
def test_a_capped_claim_over_many_endpoints_reads_their_heads_not_a_batch_each(
    database: Database, backlog: str, name: str
) -> None:
    """With the backlog's endpoint at its cap and 30 others each with 60 due rows (their
    times interleaved, as endpoints busy at once), a claim reads each other endpoint's
    oldest row, then rows only from the endpoints whose oldest are among the batch's oldest
    and no later than the batch-th of those: not a batch's worth from every endpoint (600
    rows here, and 10,000 at 200 endpoints and 50 slots). It takes the oldest rows."""
    jobs = [
        seed(database, spec=http_spec("http://127.0.0.1:9/"), count=1) for _ in range(ENDPOINTS)
    ]
    database.run("DELETE FROM executions WHERE endpoint = ANY(:e)", e=[j.endpoint for j in jobs])
    # One base time for every insert: each transaction's own now() would shift an
    # endpoint's rows by however long the inserts before it took, and on a loaded machine
    # that unweaves the interleaving this plan is about.
    base = database.run("SELECT now() - INTERVAL '10 minutes' AS t")[0]["t"]
    for i, job in enumerate(jobs):
        database.run(
            "INSERT INTO executions (job_id, endpoint, endpoint_type, status, run_at)"
            " SELECT :job, :endpoint, 'HTTP', 'QUEUED',"
            "        CAST(:base AS timestamptz) + (g * :n + :i) * INTERVAL '1 ms'"
            " FROM generate_series(1, 60) AS g",
            job=job.job_id,
            endpoint=job.endpoint,
            base=base,
            n=ENDPOINTS,
            i=i,
        )
    database.run("ANALYZE")
    # What the bound below rests on: the endpoints' rows interleave exactly, one of each in
    # turn. Rows of an endpoint shifted later (its own now(), on a loaded machine) put two
    # of an earlier endpoint's rows under the batch's bound: 131 to 137 rows read of 130.
    woven = database.run(
        "SELECT endpoint FROM executions WHERE status = 'QUEUED' AND endpoint <> :b"
        " ORDER BY run_at LIMIT :n",
        b=backlog,
        n=2 * ENDPOINTS,
    )
    assert [r["endpoint"] for r in woven] == 2 * [j.endpoint for j in jobs]
    params = _capped(backlog)
    oldest = {
        r["execution_id"]
        for r in database.run(
            "SELECT execution_id FROM executions WHERE status = 'QUEUED' AND endpoint <> :b"
            " ORDER BY run_at LIMIT :n",
            b=backlog,
            n=2 * BATCH,
        )
    }
    for plan in bounded(
        database,
        *_shape(name, params),
        # The heads, the rows taken from them (ties at the bound may add a few), and the
        # claim's own reads of its batch (the re-check, the take).
        at_most=ENDPOINTS + 5 * BATCH,
        tables=("executions", "jobs"),
    ):
        if name == "worker_claim_candidates":  # read only: both plans find the same
            assert plan.root["Actual Rows"] == BATCH, plan
    if name != "worker_claim_candidates":
        taken = {
            r["execution_id"]
            for r in database.run("SELECT execution_id FROM executions WHERE status = 'RUNNING'")
        }
        assert taken == oldest  # each plan took the oldest batch left


@pytest.mark.parametrize(
    "name", ["worker_claim_skip_locked", "worker_claim_candidates", "worker_record_and_claim"]
)
def test_a_capped_claim_reads_heads_where_most_endpoints_have_one_due_row(
    database: Database, backlog: str, name: str
) -> None:
    """Statistics that expect a row or so per endpoint (400 endpoints with one due row
    each) beside the backlog's endpoint (5,000 due rows, not at its cap): with one of the
    small endpoints at its cap, both plans read each other endpoint's head and about a
    batch more. A plan that read an endpoint's due rows on idx_executions_by_endpoint and
    sorted them by run_at would look cheap for a row or two and read the whole backlog."""
    database.run(
        "INSERT INTO endpoints (name, endpoint_type, spec)"
        " SELECT 'few-' || g, 'HTTP', e.spec FROM generate_series(1, 400) AS g, endpoints AS e"
        " WHERE e.name = :e",
        e=backlog,
    )
    database.run(
        "INSERT INTO executions (job_id, endpoint, endpoint_type, status, run_at, created_at)"
        " SELECT 'job_b1', 'few-' || g, 'HTTP', 'QUEUED', now() - g * INTERVAL '1 second',"
        " now() - g * INTERVAL '1 second' FROM generate_series(1, 400) AS g"
    )
    database.run("ANALYZE")
    bounded(
        database,
        *_shape(name, _capped("few-1")),
        at_most=400 + 5 * BATCH,
        tables=("executions", "jobs"),
    )
