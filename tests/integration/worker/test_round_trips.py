"""What a delivery costs in exchanges with the database.

The worker's claim, lease renewal and the finalize of executions nothing follows are each
one statement sent alone: no BEGIN, SET TRANSACTION or COMMIT around them. Each one is a
guarded compare-and-set, correct at READ COMMITTED (the worker pool's session isolation in
production, ``wiring.process.ISOLATION``) and at SERIALIZABLE (the tests' pool: only retried more).
A finalize that something follows (a callback, a batch's progress) keeps its transaction.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pg8000.core
import pytest

from chalicelib.db.connection import Database
from tests.support.roots import Roots
from tests.support.seed.worker import http_spec, seed

#: The claim or the wake-up decides what these tests see: make test runs them again in
#: CockroachDB's configuration (test-cockroach).
pytestmark = pytest.mark.claim_path

CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SET TRANSACTION")


class Wire:
    """The text of every statement this process sends to PostgreSQL."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sent: list[str] = []
        for method in ("execute_simple", "execute_unnamed", "prepare_statement"):
            original = getattr(pg8000.core.CoreConnection, method)
            monkeypatch.setattr(pg8000.core.CoreConnection, method, self._spy(original))

    def _spy(self, original: Any) -> Any:
        def spy(conn: Any, statement: str, *args: Any, **kwargs: Any) -> Any:
            self.sent.append(statement.lstrip())
            return original(conn, statement, *args, **kwargs)

        return spy

    def control(self) -> list[str]:
        """BEGIN, COMMIT, SET TRANSACTION ... sent so far."""
        return [s.split("\n")[0] for s in self.sent if s.upper().startswith(CONTROL)]


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> Iterator[Wire]:
    yield Wire(monkeypatch)


def test_claim_renewal_and_finalize_are_single_statements(
    database: Database, make_worker, http_target, wire: Wire
) -> None:
    seeded = seed(database, spec=http_spec(http_target.url("/ok")), count=5)
    worker = make_worker(worker_endpoint_share=1.0)
    wire.sent.clear()

    assert worker.run_once() == 5
    assert worker.drain(10)  # waits on the worker's own state: no query of the test's
    worker.leases.renew_once()

    assert wire.control() == [], [x[:90] for x in wire.sent if x.upper().startswith(CONTROL)]
    assert (
        database.run(
            "SELECT count(*) AS n FROM attempts WHERE execution_id = ANY(:ids)",
            ids=seeded.execution_ids,
        )[0]["n"]
        == 5
    )


def test_a_finalize_something_follows_keeps_its_transaction(
    database: Database, make_worker, http_target, wire: Wire
) -> None:
    seeded = seed(database, spec=http_spec(http_target.url("/ok")), count=2)
    database.execute("INSERT INTO batches (batch_id, total) VALUES ('batch_rt', 2)")
    database.execute(
        "UPDATE executions SET batch_id = 'batch_rt' WHERE execution_id = ANY(:ids)",
        ids=seeded.execution_ids,
    )
    worker = make_worker(worker_endpoint_share=1.0)
    wire.sent.clear()

    assert worker.run_once() == 2
    assert worker.drain(10)

    control = wire.control()
    assert control and control[0].startswith("BEGIN") and "COMMIT" in control


def test_the_worker_pool_runs_single_statements_at_read_committed(roots: Roots) -> None:
    worker_db = roots.current.database("worker")
    api_db = roots.current.database("api")
    show = "SELECT current_setting('transaction_isolation') AS level"
    assert worker_db.transaction(lambda tx: tx.run(show), single=True)[0]["level"] == (
        "read committed"
    )
    assert api_db.transaction(lambda tx: tx.run(show), single=True)[0]["level"] == "serializable"
    # Explicit transactions stay SERIALIZABLE in every pool.
    assert worker_db.run(show)[0]["level"] == "serializable"


def test_the_worker_and_api_pools_plan_each_statement_once_on_postgresql(
    roots: Roots, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prepared statement is planned on every call in PostgreSQL's default mode when its
    custom plans look cheaper (the claim's did: a fifth of the database's CPU per delivery);
    the worker's and the API's PostgreSQL sessions keep one plan per connection instead
    (``wiring.process.PLAN_CACHE_MODE``; test_claim_plans.py and the read plan tests show
    those plans bounded). The scheduler's keep the default."""
    show = "SELECT current_setting('plan_cache_mode') AS mode"

    def mode(root: Any, role: str) -> str:
        rows = root.database(role).transaction(lambda tx: tx.run(show), single=True)
        return str(rows[0]["mode"])

    monkeypatch.setenv("TE_CLAIM_STRATEGY", "skip_locked")
    postgres = roots.new()
    assert mode(postgres, "worker") == "force_generic_plan"
    assert mode(postgres, "api") == "force_generic_plan"
    assert mode(postgres, "scheduler") == "auto"
    # CockroachDB's configuration sends no such setting (it caches plans by itself).
    monkeypatch.setenv("TE_CLAIM_STRATEGY", "conditional_update")
    cockroach = roots.new()
    assert mode(cockroach, "worker") == "auto"
    assert mode(cockroach, "api") == "auto"
