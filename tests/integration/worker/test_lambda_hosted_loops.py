"""A worker Lambda invocation on real PostgreSQL: its heartbeat, and the scheduler loops it
hosts beside its claim when TE_WORKER_SCHEDULER_LOOPS names them (the lean profile).

Each test runs ``run_worker``'s handler path (``LambdaRoot.invoke``) in a new container
with a context of a few seconds, as the local EventBridge gives it (counting down).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chalicelib.db.connection import Database
from chalicelib.profiles import PROFILES, RUN_WORKER
from chalicelib.scheduler.lambdas import SCHEDULE_PERIOD_SEC
from chalicelib.wiring.eventbridge import InvocationContext
from tests.support.seed.scheduler import executions_of, seed_cron_job, seed_endpoint
from tests.support.seed.worker import http_spec, seed, statuses
from tests.support.served import HttpTarget, Reply

#: Claims for 2 s (half of a short budget), then drains.
BUDGET_SEC = 4


def worker_beats(db: Database) -> list[dict[str, Any]]:
    return db.run(
        "SELECT component, status, metadata, last_beat_at, fresh_until "
        "FROM region_heartbeats WHERE kind = 'worker'"
    )


@pytest.fixture
def fast_poll(monkeypatch: pytest.MonkeyPatch, lambda_root: Any) -> Any:
    monkeypatch.setenv("TE_WORKER_POLL_INTERVAL_MS", "50")
    return lambda_root


@pytest.mark.claim_path  # deployed on CockroachDB: no NOTIFY, the conditional-update claim
def test_the_lean_worker_promotes_and_materializes_while_it_claims(
    fast_poll: Any, database: Database, http_target: HttpTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in PROFILES["lean"][RUN_WORKER].env.items():
        monkeypatch.setenv(key, value)
    http_target.script("/hosted", Reply(200))
    delayed = seed(database, spec=http_spec(http_target.url("/hosted")), status="PENDING")
    seed_endpoint(database)
    cron_job = seed_cron_job(database, next_run_at=datetime.now(UTC) - timedelta(seconds=1))

    result = fast_poll.invoke(RUN_WORKER, InvocationContext(RUN_WORKER, BUDGET_SEC))

    # Promoted by the hosted promoter, then claimed and delivered by the same invocation.
    assert statuses(database, delayed.execution_ids) == {"SUCCESS": 1}
    assert len(http_target.received("/hosted")) == 1
    assert executions_of(database, cron_job)  # the tick the hosted materializer queued
    assert result["hosted"]["delayed_promoter"] == 1
    assert result["hosted"]["cron_materializer"] >= 1
    [beat] = worker_beats(database)
    states = json.loads(beat["metadata"]) if isinstance(beat["metadata"], str) else beat["metadata"]
    assert states["worker_id"] == result["worker_id"]
    # The hosted loops' states are in the worker's heartbeat, beside its claim loop's.
    assert {"delayed_promoter", "cron_materializer", "heartbeat"} <= set(states["loop_states"])


def test_every_worker_invocation_beats_and_last_says_when_the_next_one_comes(
    fast_poll: Any, database: Database
) -> None:
    result = fast_poll.invoke(RUN_WORKER, InvocationContext(RUN_WORKER, BUDGET_SEC))

    [beat] = worker_beats(database)
    assert beat["component"].startswith("worker@") and beat["status"] == "ALIVE"
    # Live until the next invocation is due (the schedule's minute) plus the grace.
    fresh_for = (beat["fresh_until"] - beat["last_beat_at"]).total_seconds()
    assert fresh_for > SCHEDULE_PERIOD_SEC
    assert result["hosted"] == {}


def test_without_hosted_loops_a_due_delayed_run_waits_for_the_scheduler(
    fast_poll: Any, database: Database, http_target: HttpTarget
) -> None:
    """The full profile's worker Lambda: the scheduler functions promote, not the worker."""
    delayed = seed(database, spec=http_spec(http_target.url("/full")), status="PENDING")

    fast_poll.invoke(RUN_WORKER, InvocationContext(RUN_WORKER, BUDGET_SEC))

    assert statuses(database, delayed.execution_ids) == {"PENDING": 1}
