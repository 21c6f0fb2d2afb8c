"""Plans with concurrency keys: 10^5 executions waiting for room in one key, whose room is
held, and the key's settle (what every end of one of its executions runs) still reads a
bounded number of rows, with the plan made for the values and with the generic one the
worker's sessions keep: its count of the rows holding room, at most 100 waiting rows and
the last-placed 100 released ones. The claim reads none of the waiting rows, and the
housekeeper's prune of idle keys reads a batch.

Plans are judged by rows read (tests/support/plans.py), never by time.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from chalicelib.db.connection import Database
from chalicelib.db.queries import queries
from tests.support.plans import bounded, metered_claim_params
from tests.support.seed.worker import http_spec, seed

pytestmark = pytest.mark.claim_path

WAITING = 100_000  #: due QUEUED executions waiting for room in the key
HOLDING = 5  #: the key's limit, all of it held by RUNNING executions
IDLE_KEYS = 20_000  #: other keys of the endpoint, untouched for two days


def _full_key(database: Database, limit: int | None) -> str:
    """An endpoint limiting each key to HOLDING (or, with ``limit`` None, a limit since
    removed) whose key "big" holds HOLDING RUNNING executions and WAITING waiting ones,
    and IDLE_KEYS other keys with nothing left. Returns the endpoint."""
    seeded = seed(database, spec=http_spec("http://127.0.0.1:9/"), count=1)
    database.run("DELETE FROM execution_logs")
    database.run("DELETE FROM executions")
    flow = {"max_concurrency": 1000} if limit is None else {"max_concurrency_per_key": limit}
    database.run(
        "UPDATE endpoints SET flow_control = CAST(:f AS JSONB) WHERE name = :e",
        f=json.dumps(flow),
        e=seeded.endpoint,
    )
    database.run(
        "INSERT INTO executions (job_id, endpoint, endpoint_type, status, run_at, worker_id,"
        "  started_at, attempt_count, concurrency_key, ordering_wait, ordering_at)"
        " SELECT :job, :e, 'HTTP', 'RUNNING', now() - INTERVAL '2 hours', 'w9',"
        "  now() - INTERVAL '1 hour', 1, 'big', FALSE, now() - INTERVAL '2 hours'"
        " FROM generate_series(1, :n) AS g",
        job=seeded.job_id,
        e=seeded.endpoint,
        n=HOLDING,
    )
    database.run(
        "INSERT INTO executions (job_id, endpoint, endpoint_type, status, run_at,"
        "  concurrency_key, ordering_wait, ordering_at, ordering_seq)"
        " SELECT :job, :e, 'HTTP', 'QUEUED', now() - INTERVAL '1 hour' + g * INTERVAL '1 ms',"
        "  'big', TRUE, now() - INTERVAL '1 hour' + g * INTERVAL '1 ms', g"
        " FROM generate_series(1, :n) AS g",
        job=seeded.job_id,
        e=seeded.endpoint,
        n=WAITING,
    )
    database.run(
        "INSERT INTO concurrency_keys (endpoint, concurrency_key, touched_at)"
        " SELECT :e, 'idle-' || g, now() - INTERVAL '2 days' FROM generate_series(1, :n) AS g",
        e=seeded.endpoint,
        n=IDLE_KEYS,
    )
    database.run(
        "INSERT INTO concurrency_keys (endpoint, concurrency_key) VALUES (:e, 'big')",
        e=seeded.endpoint,
    )
    database.run("ANALYZE")
    return seeded.endpoint


#: The rows holding room, a chunk of waiting rows and of released ones read, and a chunk
#: released (its primary key probes and the rows they fetch).
SETTLE_READS = HOLDING + 4 * 100 + 10


def _settle(endpoint: str) -> dict[str, object]:
    return {"keys": json.dumps([{"endpoint": endpoint, "key": "big"}])}


def test_settling_a_full_key_reads_its_room_not_its_queue_with_either_plan(
    database: Database,
) -> None:
    endpoint = _full_key(database, HOLDING)
    bounded(
        database,
        queries["concurrency_settle"],
        _settle(endpoint),
        at_most=SETTLE_READS,
        tables=("executions", "concurrency_keys"),
    )


def test_settling_a_key_whose_limit_was_removed_reads_one_chunk_with_either_plan(
    database: Database,
) -> None:
    endpoint = _full_key(database, None)
    bounded(
        database,
        queries["concurrency_settle"],
        _settle(endpoint),
        at_most=SETTLE_READS,
        tables=("executions", "concurrency_keys"),
    )


def test_the_metered_claim_reads_no_waiting_rows_with_either_plan(database: Database) -> None:
    endpoint = _full_key(database, HOLDING)
    params = metered_claim_params(database, endpoint, 20)
    bounded(
        database,
        queries["worker_claim_metered"],
        params,
        at_most=100,
        tables=("executions",),  # one job: its table is read as the planner likes
    )
    taken = database.run("SELECT execution_id FROM executions WHERE worker_id = 'w1'")
    assert taken == []


def test_the_housekeepers_prune_of_idle_concurrency_keys_reads_a_batch_with_either_plan(
    database: Database,
) -> None:
    _full_key(database, HOLDING)
    bounded(
        database,
        queries["housekeeping_prune_concurrency_keys"],
        {"cutoff": datetime.now(UTC) - timedelta(days=1), "batch": 50},
        at_most=5 * 50,
        tables=("concurrency_keys", "executions"),
    )
