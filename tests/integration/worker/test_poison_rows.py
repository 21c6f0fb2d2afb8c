"""No row can stop the worker's claim or finalize: a poison execution, made by
SQL, is claimed beside a healthy one; the healthy one is delivered to a real loopback HTTP
target and the poison one ends FAILED with an ``UNPROCESSABLE`` attempt and a log line
saying why (it shows in the dead-letter view and never blocks a claim again), while the
worker's slots all come back. Real PostgreSQL at SERIALIZABLE."""

from __future__ import annotations

import dataclasses
import math
from datetime import UTC, datetime
from typing import Any

import pytest

from chalicelib.db.connection import Database
from chalicelib.domain.delivery import DeliveryOutcome, DeliveryRequest
from chalicelib.worker.dispatchers.http import HttpDispatcher
from tests.support.seed.worker import (
    attempts,
    execution,
    http_spec,
    logs,
    retry_policy,
    seed,
)
from tests.support.served import HttpTarget, Reply
from tests.support.worker_runs import settle

#: The claim or the wake-up decides what these tests see: make test runs them again in
#: CockroachDB's configuration (test-cockroach).
pytestmark = pytest.mark.claim_path

#: SQL that makes one execution (:e, of job :j) one the worker cannot process, and the
#: attempt error type it must end FAILED with.
POISONS = {
    # The endpoint snapshot is JSON but not an object (before: left RUNNING, reclaimed and
    # claimed again after every lease until its attempts ran out, as WORKER_LOST).
    "snapshot not an object": (
        "UPDATE jobs SET endpoint_snapshot = CAST('\"not an object\"' AS JSONB) WHERE job_id = :j",
        "UNPROCESSABLE",
    ),
    # The retry policy has the wrong type: checked before the send now (before: read only
    # after a failed delivery, which raised and left the execution RUNNING to be sent again).
    "retry policy not an object": (
        "UPDATE jobs SET endpoint_snapshot = jsonb_set(endpoint_snapshot, '{retry_policy}', "
        "CAST('\"often\"' AS JSONB)) WHERE job_id = :j",
        "UNPROCESSABLE",
    ),
    # An endpoint type no dispatcher serves (before: a KeyError at the send, left RUNNING).
    "unknown endpoint type": (
        "UPDATE executions SET endpoint_type = 'CARRIER_PIGEON' WHERE execution_id = :e",
        "UNPROCESSABLE",
    ),
    # Handled before this issue already, kept as a guard: a spec missing from the snapshot
    # and a config snapshot of the wrong shape fail their templates.
    "snapshot without spec": (
        "UPDATE jobs SET endpoint_snapshot = endpoint_snapshot - 'spec' WHERE job_id = :j",
        "TEMPLATE_RESOLUTION_FAILED",
    ),
    "config snapshot not an object": (
        "UPDATE executions SET config_snapshot = CAST('[1, 2]' AS JSONB) WHERE execution_id = :e",
        "TEMPLATE_RESOLUTION_FAILED",
    ),
}


def poisoned(database: Database, url: str, poison: str) -> str:
    """The poison execution, QUEUED and due."""
    spec = http_spec(url)
    if poison == "config snapshot not an object":  # a template that reads the config
        spec = http_spec(url, body_template={"n": "{{config.n}}"})
    bad = seed(database, spec=spec, policy=retry_policy(max_attempts=3))
    database.execute(POISONS[poison][0], j=bad.job_id, e=bad.execution_id)
    return bad.execution_id


def assert_set_aside(
    database: Database, execution_id: str, error_type: str = "UNPROCESSABLE"
) -> dict[str, Any]:
    """FAILED at once (attempts were left), one FAILED attempt of ``error_type``, a log line."""
    row = execution(database, execution_id)
    assert row["status"] == "FAILED"
    [attempt] = attempts(database, execution_id)
    assert attempt["status"] == "FAILED"
    assert attempt["error"]["type"] == error_type, attempt["error"]
    messages = [line["message"] for line in logs(database, execution_id)]
    assert any(error_type in m or "failed" in m for m in messages), messages
    return attempt


@pytest.mark.parametrize("poison", sorted(POISONS))
def test_claim_sets_aside_an_execution_it_cannot_process_and_delivers_the_other(
    database: Database, make_worker: Any, http_target: HttpTarget, poison: str
) -> None:
    http_target.script("/hook", Reply(500))  # a retry policy is only read after a failure
    http_target.script("/ok", Reply(200))
    bad = poisoned(database, http_target.url("/hook"), poison)
    good = seed(database, spec=http_spec(http_target.url("/ok"))).execution_id
    worker = make_worker()
    settle(worker, database, [bad, good], timeout=10)
    assert execution(database, good)["status"] == "SUCCESS"
    assert_set_aside(database, bad, POISONS[poison][1])
    assert http_target.received("/hook") == []  # nothing was sent for the poison row
    assert worker.in_flight == 0  # every slot came back


class NotANumberOutput:
    """The real HTTP dispatcher, whose outputs for ``/nan`` gain a NaN: JSON cannot carry
    it, so the database refuses the attempt's record. (A target's bytes can no longer do
    that: outputs are made storable, NUL included.)"""

    def __init__(self) -> None:
        self._http = HttpDispatcher(allow_private=True, clock=lambda: datetime.now(UTC))

    async def dispatch_async(self, request: DeliveryRequest) -> DeliveryOutcome:
        outcome = await self._http.dispatch_async(request)
        if outcome.output is not None and request.spec["url"].endswith("/nan"):
            return dataclasses.replace(outcome, output={**outcome.output, "ratio": math.nan})
        return outcome

    def dispatch(self, request: DeliveryRequest) -> DeliveryOutcome:
        raise AssertionError("the worker uses dispatch_async")

    async def aclose(self) -> None:
        await self._http.aclose()

    def close(self) -> None:
        self._http.close()


def test_finalize_sets_aside_a_result_the_database_refuses_and_records_the_others(
    database: Database, make_worker: Any, http_target: HttpTarget
) -> None:
    # A result the database refuses makes the attempt unwritable. Before, the whole
    # finalize batch was retried for ever.
    http_target.script("/nan", Reply(200, body=b"fine"))
    http_target.script("/ok", Reply(200, body=b"fine"))
    bad = seed(database, spec=http_spec(http_target.url("/nan"))).execution_id
    good = seed(database, spec=http_spec(http_target.url("/ok")), count=3).execution_ids
    worker = make_worker(dispatchers={"HTTP": NotANumberOutput()})
    settle(worker, database, [bad, *good], timeout=10)
    for execution_id in good:
        assert execution(database, execution_id)["status"] == "SUCCESS"
    attempt = assert_set_aside(database, bad)
    assert "invalid input syntax for type json" in attempt["error"]["message"]
    [line] = [x for x in logs(database, bad) if x["level"] == "ERROR"]
    assert "could not be recorded" in line["message"]
    assert len(http_target.received("/nan")) == 1  # delivered once, not again
    assert worker.in_flight == 0
