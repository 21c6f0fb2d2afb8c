"""Parked backlogs (migration 018): the due rows of an endpoint nobody may claim from the
fast claim (paused, flow-controlled, held for longer than a moment) leave the index the
claim walks, so an idle poll costs the same with or without such a backlog; they come back
oldest first once the endpoint is released. The delayed promoter parks and unparks."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from chalicelib.db.connection import Database
from chalicelib.db.queries import queries
from chalicelib.scheduler.promoter import PARK_PAGE, DelayedPromoter
from chalicelib.services.endpoints import EndpointService
from chalicelib.services.metrics import MetricsService
from chalicelib.worker.strategies import ClaimLimits, MeteredClaim, claim_strategy
from tests.support.plans import bounded
from tests.support.seed.worker import http_spec, seed

pytestmark = pytest.mark.claim_path

STRATEGIES = ("skip_locked", "conditional_update")
#: Larger than one parking page, so parking and unparking take more than one pass.
BACKLOG = PARK_PAGE + 500


def _backlog(db: Database, count: int = BACKLOG) -> str:
    """An endpoint with ``count`` due executions, older than anything else due."""
    seeded = seed(db, spec=http_spec("http://127.0.0.1:9/x"), count=1)
    db.run(
        "INSERT INTO executions (job_id, endpoint, endpoint_type, status, run_at)"
        " SELECT :job, :endpoint, 'HTTP', 'QUEUED', now() - INTERVAL '1 hour'"
        "   + g * INTERVAL '1 millisecond' FROM generate_series(2, :count) AS g",
        job=seeded.job_id,
        endpoint=seeded.endpoint,
        count=count,
    )
    db.run(
        "UPDATE executions SET run_at = now() - INTERVAL '2 hours' WHERE execution_id = :id",
        id=seeded.execution_id,
    )
    return seeded.endpoint


def _parked(db: Database, endpoint: str) -> tuple[int, int]:
    """(parked, not parked) due rows of the endpoint."""
    row = db.run(
        "SELECT count(*) FILTER (WHERE parked) AS p, count(*) FILTER (WHERE NOT parked) AS u"
        " FROM executions WHERE endpoint = :e AND status IN ('QUEUED', 'RETRYING')",
        e=endpoint,
    )[0]
    return int(row["p"]), int(row["u"])


def _passes(db: Database, n: int = 1) -> list[dict[str, int]]:
    promoter = DelayedPromoter(db)
    return [dict(promoter.run_once().detail) for _ in range(n)]


def _claim(strategy: str, db: Database, batch: int = 10) -> list[str]:
    claimed = claim_strategy(strategy).claim(db, "w1", batch, ClaimLimits())
    return [c.execution_id for c in claimed]


def test_a_paused_backlog_is_parked_page_by_page_and_the_claim_reads_none_of_it(
    database: Database,
) -> None:
    paused = _backlog(database)
    EndpointService(database).pause(paused)
    other = seed(database, spec=http_spec("http://127.0.0.1:9/y"), count=3)
    database.run("ANALYZE executions")

    first, second = _passes(database, 2)

    assert (first["parked"], second["parked"]) == (PARK_PAGE, BACKLOG - PARK_PAGE)
    assert _parked(database, paused) == (BACKLOG, 0)
    assert database.run("SELECT parked_rows FROM endpoints WHERE name = :e", e=paused)[0][
        "parked_rows"
    ]
    # The other endpoint's rows stay claimable, and the claim's walk reads them alone.
    assert _parked(database, other.endpoint) == (0, 3)
    limits = ClaimLimits().params()
    fairness = {k: limits[k] for k in ("default_cap", "full", "busy", "pending")}
    bounded(
        database,
        queries["worker_claim_candidates"],
        {"batch": 50, **fairness},
        at_most=10,
        tables=("executions",),
    )


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_resumed_endpoint_is_unparked_oldest_first_and_claimed(
    database: Database, strategy: str
) -> None:
    paused = _backlog(database)
    endpoints = EndpointService(database)
    endpoints.pause(paused)
    _passes(database, 2)
    endpoints.resume(paused)

    (first,) = _passes(database)
    assert first["unparked"] == PARK_PAGE
    # The oldest rows come back first, so what is claimed first is the oldest work.
    oldest = database.run(
        "SELECT execution_id FROM executions WHERE endpoint = :e ORDER BY run_at LIMIT 10",
        e=paused,
    )
    assert sorted(_claim(strategy, database)) == sorted(r["execution_id"] for r in oldest)

    _passes(database, 2)  # the rest, then the flag goes with the last parked row
    assert _parked(database, paused) == (0, BACKLOG - 10)
    assert not database.run("SELECT parked_rows FROM endpoints WHERE name = :e", e=paused)[0][
        "parked_rows"
    ]


def test_a_long_hold_parks_and_a_short_one_does_not(database: Database) -> None:
    long_held = _backlog(database, 20)
    short_held = _backlog(database, 20)
    database.run(
        "UPDATE endpoints SET held_until = now() + CASE WHEN name = :l THEN INTERVAL '1 hour'"
        " ELSE INTERVAL '2 seconds' END WHERE name IN (:l, :s)",
        l=long_held,
        s=short_held,
    )
    _passes(database)
    assert (_parked(database, long_held), _parked(database, short_held)) == ((20, 0), (0, 20))

    # The hold is over: its rows come back and the lag probe saw them all along.
    lag = dict(MetricsService(database, lambda: datetime.now(UTC)).snapshot().endpoint_lag_sec)
    assert lag[long_held] > timedelta(hours=1).total_seconds()
    database.run("UPDATE endpoints SET held_until = now() - INTERVAL '1 second'")
    _passes(database)
    assert _parked(database, long_held) == (0, 20)


def test_a_flow_controlled_backlog_is_parked_and_still_metered(database: Database) -> None:
    metered = _backlog(database, 30)
    database.run(
        "UPDATE endpoints SET flow_control = CAST(:flow AS JSONB) WHERE name = :name",
        flow=json.dumps({"max_concurrency": 50}),
        name=metered,
    )
    database.run("INSERT INTO endpoint_flow (endpoint, tokens) VALUES (:name, 0)", name=metered)
    _passes(database)
    assert _parked(database, metered) == (30, 0)

    claimed = MeteredClaim().claim(database, "w1", 12, ClaimLimits(), (metered,))
    oldest = database.run(
        "SELECT execution_id FROM executions WHERE endpoint = :e ORDER BY run_at LIMIT 12",
        e=metered,
    )
    assert sorted(c.execution_id for c in claimed) == sorted(r["execution_id"] for r in oldest)

    # Flow control lifted while they run: the unparking pass clears the endpoint's flag
    # once no due row is parked, and what comes back from RUNNING (a retry, a reclaim) is
    # not parked either, so the fast claim sees it.
    database.run("UPDATE endpoints SET flow_control = NULL WHERE name = :name", name=metered)
    _passes(database)
    _passes(database)
    database.run(
        "UPDATE executions SET status = 'RETRYING', run_at = now() - INTERVAL '3 hours'"
        " WHERE endpoint = :e AND status = 'RUNNING'",
        e=metered,
    )
    assert _parked(database, metered) == (0, 30)
    assert len(_claim("skip_locked", database, 12)) == 12


def test_parked_rows_are_not_ahead_in_the_queue(database: Database) -> None:
    paused = _backlog(database, 50)
    EndpointService(database).pause(paused)
    _passes(database)
    (mine,) = seed(database, spec=http_spec("http://127.0.0.1:9/z"), count=1).execution_ids
    row = database.run("SELECT run_at FROM executions WHERE execution_id = :id", id=mine)[0]
    position = database.run(
        queries["executions_queue_position"],
        run_at=row["run_at"],
        execution_id=mine,
        max_ahead=1000,
    )[0]["position"]
    assert position == 1


def test_parking_and_unparking_read_a_page_with_either_plan(database: Database) -> None:
    """scheduler_park and scheduler_unpark read at most a page of due rows of the endpoints
    they move (and probe each moved row once by key), never the endpoint's ended history nor
    other endpoints' due work, with the plan made for the values and with the generic one."""
    paused = _backlog(database)
    _backlog(database, 5_000)  # another endpoint's due work, claimable: never read here
    job = database.run("SELECT job_id FROM executions WHERE endpoint = :e LIMIT 1", e=paused)[0]
    database.run(
        "INSERT INTO executions (job_id, endpoint, endpoint_type, status, run_at, completed_at)"
        " SELECT :job, :endpoint, 'HTTP', 'SUCCESS', now() - INTERVAL '2 days',"
        " now() - INTERVAL '2 days' FROM generate_series(1, 20000)",
        job=job["job_id"],
        endpoint=paused,
    )
    EndpointService(database).pause(paused)
    database.run("ANALYZE executions")
    page = {"page": PARK_PAGE}
    # A page read (the endpoint's range whole, by a bitmap scan, when the page is most of
    # it), and each of the page's rows probed once by the update and counted once more as
    # updated.
    at_most = BACKLOG + 2 * PARK_PAGE + 100
    bounded(
        database,
        queries["scheduler_park"],
        {**page, "hold_ms": 5_000},
        at_most=at_most,
        tables=("executions",),
    )
    assert _parked(database, paused) == (BACKLOG, 0)  # both plans ran: two pages
    EndpointService(database).resume(paused)
    bounded(database, queries["scheduler_unpark"], page, at_most=at_most, tables=("executions",))
