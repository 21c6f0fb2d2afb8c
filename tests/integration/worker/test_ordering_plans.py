"""The claim's plans with ordering keys: 10^5 executions queued behind a hung key's head (it
is RUNNING, its target hanging) or a blocked key's (its head FAILED, the endpoint set to
block), and the claim still reads a claim's worth of rows, with the plan made for the values
and with the generic one the worker's sessions keep. Rows waiting behind their key's head
are outside the indexes the claim walks. Settling a key (what a head's end runs) reads a
few rows however long its queue, and so do the blocked keys' page and count.

Plans are judged by rows read (tests/support/plans.py), never by time.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from chalicelib.db.connection import Database
from chalicelib.db.queries import SQL_DIR, Query, parse_sql_file, queries
from chalicelib.db.shapes import shaped
from tests.support.plans import bounded, metered_claim_params
from tests.support.seed.worker import http_spec, seed

pytestmark = pytest.mark.claim_path

QUEUED_BEHIND = 100_000  #: due QUEUED executions behind the stuck key's head
FREE = 60  #: due executions without a key, of another endpoint
IDLE_KEYS = 20_000  #: keys of the stuck endpoint with nothing blocked
BATCH = 20
AT_MOST = 5 * BATCH


def _stuck_key(database: Database, head_status: str) -> tuple[str, str]:
    """One endpoint whose key "stuck" has a head in ``head_status`` (RUNNING: hung; FAILED:
    blocked) and QUEUED_BEHIND due executions waiting behind it; another endpoint with FREE
    due executions without a key. Returns (stuck endpoint, free endpoint)."""
    stuck = seed(database, spec=http_spec("http://127.0.0.1:9/"), count=1)
    free = seed(database, spec=http_spec("http://127.0.0.1:9/"), count=1)
    database.run("DELETE FROM execution_logs")
    database.run("DELETE FROM executions")
    database.run(
        "UPDATE endpoints SET ordering = CAST(:o AS JSONB) WHERE name = :e",
        o=json.dumps({"on_failure": "block"}),
        e=stuck.endpoint,
    )
    database.run(
        "INSERT INTO executions (job_id, endpoint, endpoint_type, status, run_at, worker_id,"
        "  started_at, attempt_count, ordering_key, ordering_wait, ordering_at)"
        " VALUES (:job, :e, 'HTTP', :status, now() - INTERVAL '2 hours', 'w9',"
        "  now() - INTERVAL '1 hour', 1, 'stuck', FALSE, now() - INTERVAL '2 hours')",
        job=stuck.job_id,
        e=stuck.endpoint,
        status=head_status,
    )
    head = database.run("SELECT execution_id FROM executions")[0]["execution_id"]
    if head_status == "FAILED":
        database.run(
            "INSERT INTO ordering_keys (endpoint, ordering_key, blocked_execution_id,"
            " blocked_since) VALUES (:e, 'stuck', :h, now())",
            e=stuck.endpoint,
            h=head,
        )
    else:
        database.run(
            "INSERT INTO ordering_keys (endpoint, ordering_key) VALUES (:e, 'stuck')",
            e=stuck.endpoint,
        )
    database.run(  # a job per execution, as POST /jobs writes them
        "INSERT INTO jobs (job_id, endpoint, endpoint_type, trigger_type, endpoint_snapshot,"
        "  ordering_key)"
        " SELECT 'job_k' || g, :e, 'HTTP', 'IMMEDIATE', j.endpoint_snapshot, 'stuck'"
        " FROM generate_series(1, :n) AS g, jobs AS j WHERE j.job_id = :job",
        job=stuck.job_id,
        e=stuck.endpoint,
        n=QUEUED_BEHIND,
    )
    database.run(
        "INSERT INTO executions (job_id, endpoint, endpoint_type, status, run_at,"
        "  ordering_key, ordering_wait, ordering_at, ordering_seq)"
        " SELECT 'job_k' || g, :e, 'HTTP', 'QUEUED',"
        "  now() - INTERVAL '1 hour' + g * INTERVAL '1 ms',"
        "  'stuck', TRUE, now() - INTERVAL '1 hour' + g * INTERVAL '1 ms', g"
        " FROM generate_series(1, :n) AS g",
        job=stuck.job_id,
        e=stuck.endpoint,
        n=QUEUED_BEHIND,
    )
    database.run(  # other keys, none blocked: rows the key reads must pass over
        "INSERT INTO ordering_keys (endpoint, ordering_key)"
        " SELECT :e, 'idle-' || g FROM generate_series(1, :n) AS g",
        e=stuck.endpoint,
        n=IDLE_KEYS,
    )
    database.run(
        "INSERT INTO executions (job_id, endpoint, endpoint_type, status, run_at)"
        " SELECT :job, :e, 'HTTP', 'QUEUED', now() - INTERVAL '1 minute' + g * INTERVAL '1 ms'"
        " FROM generate_series(1, :n) AS g",
        job=free.job_id,
        e=free.endpoint,
        n=FREE,
    )
    database.run("ANALYZE")
    return stuck.endpoint, free.endpoint


@pytest.fixture(params=["RUNNING", "FAILED"], ids=["hung", "blocked"])
def stuck(database: Database, request: pytest.FixtureRequest) -> tuple[str, str]:
    return _stuck_key(database, request.param)


def _params(capped: str | None) -> dict[str, object]:
    return {
        "batch": BATCH,
        "worker_id": "w1",
        "lease_ms": 300_000,
        "default_cap": BATCH,
        "full": [] if capped is None else [capped],
        "busy": json.dumps({} if capped is None else {capped: BATCH}),
        "pending": 0,
        "results": "[]",
        "writer": "w1/t",
    }


def _part(file: str, name: str) -> Query:
    """A part of a statement (a CTE GET /metrics reads), as a statement of its own: the CTE
    and a SELECT of it, which PostgreSQL folds into one query planned as the CTE's body."""
    parsed = parse_sql_file((SQL_DIR / file).read_text(encoding="utf-8"), file)
    return Query(name=name, sql=f"WITH\n{parsed.parts[name]}\nSELECT * FROM {name}", source=file)


def _shape(name: str, params: dict[str, object]) -> tuple[Query, dict[str, object]]:
    """The statement the worker sends for ``params``: ``name``, or its ``_capped`` twin while
    an endpoint is at its cap (``full`` names one)."""
    capped = "_capped" if params.get("full") else ""
    return shaped(queries[f"{name}{capped}"], params)


def _taken(database: Database) -> dict[str, int]:
    rows = database.run(
        "SELECT endpoint, count(*) AS n FROM executions"
        " WHERE status = 'RUNNING' AND worker_id = 'w1' GROUP BY endpoint"
    )
    return {r["endpoint"]: r["n"] for r in rows}


@pytest.mark.parametrize("name", ["worker_claim_skip_locked", "worker_record_and_claim"])
def test_a_claim_reads_a_batch_past_a_stuck_keys_queue_with_either_plan(
    database: Database, stuck: tuple[str, str], name: str
) -> None:
    """The stuck key's 10^5 due rows are older than every other: the claim never reads them
    (nor takes one), and takes a batch of the other endpoint's per plan."""
    _, free_endpoint = stuck
    bounded(database, *_shape(name, _params(None)), at_most=AT_MOST, tables=("executions", "jobs"))
    assert _taken(database) == {free_endpoint: 2 * BATCH}


def test_the_conditional_claims_candidates_pass_over_a_stuck_keys_queue_with_either_plan(
    database: Database, stuck: tuple[str, str]
) -> None:
    for plan in bounded(
        database,
        *_shape("worker_claim_candidates", _params(None)),
        at_most=AT_MOST,
        tables=("executions",),
    ):
        assert plan.root["Actual Rows"] == BATCH, plan


@pytest.mark.parametrize(
    "name", ["worker_claim_skip_locked", "worker_claim_candidates", "worker_record_and_claim"]
)
def test_a_capped_claim_reads_no_stuck_keys_queue_with_either_plan(
    database: Database, stuck: tuple[str, str], name: str
) -> None:
    """With some other endpoint at its cap (the shape that probes each endpoint's oldest due
    rows on idx_executions_due_by_endpoint), the stuck key's endpoint's rows are not read
    either: its head probe finds nothing due and claimable."""
    _, free_endpoint = stuck
    capped = seed(database, spec=http_spec("http://127.0.0.1:9/"), count=1).endpoint
    database.run("ANALYZE")
    bounded(
        database,
        *_shape(name, _params(capped)),
        at_most=AT_MOST,
        tables=("executions", "jobs"),
    )
    if name != "worker_claim_candidates":
        assert _taken(database) == {free_endpoint: 2 * BATCH}


def test_the_metered_claim_reads_no_stuck_keys_queue_with_either_plan(
    database: Database, stuck: tuple[str, str]
) -> None:
    """A flow-controlled endpoint's claim reads its due rows parked or not: the rows waiting
    behind the stuck key are neither."""
    stuck_endpoint, _ = stuck
    params = metered_claim_params(database, stuck_endpoint, BATCH)
    bounded(
        database,
        queries["worker_claim_metered"],
        params,
        at_most=AT_MOST,
        tables=("executions", "jobs"),
    )
    assert _taken(database) == {}


def test_settling_a_key_reads_its_head_and_next_not_its_queue_with_either_plan(
    database: Database, stuck: tuple[str, str]
) -> None:
    """What a head's end runs: two probes of idx_executions_ordering per key."""
    stuck_endpoint, _ = stuck
    keys = json.dumps([{"endpoint": stuck_endpoint, "key": "stuck"}])
    bounded(
        database,
        queries["ordering_settle"],
        {"keys": keys},
        at_most=10,
        tables=("executions", "ordering_keys"),
    )


def test_the_blocked_keys_page_and_count_read_the_blocked_keys_only_with_either_plan(
    database: Database, stuck: tuple[str, str]
) -> None:
    stuck_endpoint, _ = stuck
    bounded(
        database,
        queries["ordering_blocked_page"],
        {"endpoint": stuck_endpoint, "after": None, "limit_plus_one": 51},
        at_most=60,
        tables=("ordering_keys",),
    )
    bounded(
        database,
        _part("metrics.sql", "metrics_ordering_blocked"),
        {},
        at_most=60,
        tables=("ordering_keys",),
    )


def test_the_housekeepers_prune_of_idle_keys_reads_a_batch_with_either_plan(
    database: Database, stuck: tuple[str, str]
) -> None:
    """20,000 idle keys and the stuck one: a prune reads a batch of idle keys and probes
    each one's live executions, not the stuck key's queue nor every key."""
    database.run("UPDATE ordering_keys SET touched_at = now() - INTERVAL '2 days'")
    database.run("ANALYZE")
    bounded(
        database,
        queries["housekeeping_prune_ordering_keys"],
        {"cutoff": datetime.now(UTC) - timedelta(days=1), "batch": 50},
        at_most=5 * 50,
        tables=("ordering_keys", "executions"),
    )
