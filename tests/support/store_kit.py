"""Seeding the worker's stores the same way, whichever store: :class:`StoreKit`.

A kit makes endpoints and executions due at a time relative to the store's now, pauses,
holds or flow-controls an endpoint, takes an execution back as the reclaimer would, reads
an execution back (:class:`ExecutionState`), and builds the store of a worker over its
rows. :class:`MemoryKit` seeds :class:`~chalicelib.worker.memory.InMemoryStore` under a
:class:`~tests.support.clock.FakeClock`; :class:`PostgresKit` seeds the test database with
plain SQL and builds :class:`~chalicelib.worker.postgres.PostgresStore` with the run's
claim strategy. The conformance suite runs one scenario on both.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from chalicelib.db.connection import Database
from chalicelib.domain.statuses import AttemptStatus, ExecutionStatus
from chalicelib.worker.memory import InMemoryStore, MemoryData, MemoryEndpoint
from chalicelib.worker.models import ClaimedExecution, FinishedExecution
from chalicelib.worker.postgres import PostgresStore
from chalicelib.worker.store import WorkerStore
from chalicelib.worker.strategies import claim_strategy
from tests.support.clock import FakeClock
from tests.support.environment import PROFILE
from tests.support.seed.worker import http_spec, retry_policy, seed


@dataclass(frozen=True)
class ExecutionState:
    """An execution read back: its status, its owner, its attempts (number, status), and
    its run_at and lease as seconds from the store's now (None: not set)."""

    status: str
    worker_id: str | None
    attempts: tuple[tuple[int, str], ...]
    run_at_in: float
    lease_in: float | None


class StoreKit(Protocol):
    def store(self, worker_id: str) -> WorkerStore: ...

    def endpoint(self, *, max_concurrent: int | None = None) -> str: ...

    def execution(self, endpoint: str, *, due_in: float = -1.0) -> str: ...

    def pause(self, endpoint: str) -> None: ...

    def hold(self, endpoint: str, seconds: float) -> None: ...

    def flow_control(self, endpoint: str) -> None: ...

    def take_back(self, execution_id: str) -> None: ...

    def read(self, execution_id: str) -> ExecutionState: ...


def finished(
    claimed: ClaimedExecution,
    status: ExecutionStatus,
    *,
    retry_delay_ms: int | None = None,
    hold_ms: int | None = None,
    gone: bool = False,
    at: datetime,
) -> FinishedExecution:
    """The finished attempt of ``claimed`` that moves it to ``status``."""
    attempt = AttemptStatus.SUCCESS if status == ExecutionStatus.SUCCESS else AttemptStatus.FAILED
    return FinishedExecution(
        execution_id=claimed.execution_id,
        endpoint=claimed.endpoint,
        attempt_number=claimed.attempt,
        attempt_status=attempt,
        next_status=status,
        started_at=at,
        completed_at=at,
        duration_ms=5,
        error=None if attempt == AttemptStatus.SUCCESS else {"type": "HTTP_ERROR"},
        retry_delay_ms=retry_delay_ms,
        hold_ms=hold_ms,
        gone=gone,
        follows=False,
        log_message=f"attempt {claimed.attempt}",
    )


def _spec(url: str, max_concurrent: int | None) -> dict[str, Any]:
    return http_spec(url, **({} if max_concurrent is None else {"max_concurrent": max_concurrent}))


class MemoryKit:
    """:class:`StoreKit` over an :class:`InMemoryStore`'s rows, on a :class:`FakeClock`."""

    def __init__(self, clock: FakeClock | None = None) -> None:
        self.clock = clock or FakeClock()
        self.data = MemoryData(self.clock)
        self._names = 0

    def store(self, worker_id: str) -> InMemoryStore:
        return InMemoryStore(worker_id, self.data)

    def endpoint(
        self,
        *,
        max_concurrent: int | None = None,
        url: str = "http://t/",
        policy: dict[str, Any] | None = None,
    ) -> str:
        self._names += 1
        name = f"ep-{self._names}"
        endpoint = MemoryEndpoint(
            name, spec=_spec(url, max_concurrent), retry_policy=policy or retry_policy()
        )
        self.data.add_endpoint(endpoint)
        return name

    def execution(self, endpoint: str, *, due_in: float = -1.0) -> str:
        """Due ``due_in`` seconds from now, with an input the seeded endpoints' body
        template resolves."""
        run_at = self.clock() + timedelta(seconds=due_in)
        execution = self.data.add_execution(endpoint, run_at=run_at, input={"user_id": "u1"})
        return execution.execution_id

    def pause(self, endpoint: str) -> None:
        self.data.endpoints[endpoint].paused = True

    def hold(self, endpoint: str, seconds: float) -> None:
        self.data.endpoints[endpoint].held_until = self.clock() + timedelta(seconds=seconds)

    def flow_control(self, endpoint: str) -> None:
        self.data.endpoints[endpoint].flow_controlled = True

    def take_back(self, execution_id: str) -> None:
        self.data.take_back(execution_id)

    def read(self, execution_id: str) -> ExecutionState:
        with self.data.lock:
            row = self.data.executions[execution_id]
            now = self.clock()
            lease = row.lease_expires_at
            return ExecutionState(
                status=row.status,
                worker_id=row.worker_id,
                attempts=tuple((a.attempt_number, a.status) for a in row.attempts),
                run_at_in=(row.run_at - now).total_seconds(),
                lease_in=None if lease is None else (lease - now).total_seconds(),
            )


class PostgresKit:
    """:class:`StoreKit` over the test database (the database's own now())."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._jobs: dict[str, str] = {}

    def store(self, worker_id: str) -> PostgresStore:
        strategy = claim_strategy(PROFILE.get("TE_CLAIM_STRATEGY", "skip_locked"))
        return PostgresStore(self.db, worker_id, strategy)

    def endpoint(self, *, max_concurrent: int | None = None, url: str = "http://t/") -> str:
        spec = _spec(url, max_concurrent)
        seeded = seed(self.db, spec=spec, count=0)
        self._jobs[seeded.endpoint] = seeded.job_id
        return seeded.endpoint

    def execution(self, endpoint: str, *, due_in: float = -1.0) -> str:
        return str(
            self.db.run(
                "INSERT INTO executions (job_id, endpoint, endpoint_type, status, input, "
                "max_attempts, idempotency_key, run_at) "
                "VALUES (:job, :endpoint, 'HTTP', 'QUEUED', CAST('{}' AS JSONB), 3, :key, "
                "now() + CAST(:due_in AS FLOAT8) * INTERVAL '1 second') RETURNING execution_id",
                job=self._jobs[endpoint],
                endpoint=endpoint,
                key=uuid.uuid4().hex,
                due_in=due_in,
            )[0]["execution_id"]
        )

    def _endpoint(self, endpoint: str, assignment: str, **params: Any) -> None:
        self.db.run(
            f"UPDATE endpoints SET {assignment} WHERE name = :name", name=endpoint, **params
        )

    def pause(self, endpoint: str) -> None:
        self._endpoint(endpoint, "paused_at = now(), paused_reason = 'OPERATOR'")

    def hold(self, endpoint: str, seconds: float) -> None:
        self._endpoint(
            endpoint,
            "held_until = now() + CAST(:s AS FLOAT8) * INTERVAL '1 second'",
            s=seconds,
        )

    def flow_control(self, endpoint: str) -> None:
        control = json.dumps({"max_concurrency": 1})
        self._endpoint(endpoint, "flow_control = CAST(:c AS JSONB)", c=control)

    def take_back(self, execution_id: str) -> None:
        self.db.run(
            "UPDATE executions SET status = 'RETRYING', worker_id = NULL, run_at = now(), "
            "lease_expires_at = NULL WHERE execution_id = :id",
            id=execution_id,
        )

    def read(self, execution_id: str) -> ExecutionState:
        row = self.db.run(
            "SELECT status, worker_id, "
            "CAST(EXTRACT(EPOCH FROM run_at - now()) AS FLOAT8) AS run_at_in, "
            "CAST(EXTRACT(EPOCH FROM lease_expires_at - now()) AS FLOAT8) AS lease_in "
            "FROM executions WHERE execution_id = :id",
            id=execution_id,
        )[0]
        attempts = self.db.run(
            "SELECT attempt_number, status FROM attempts WHERE execution_id = :id "
            "ORDER BY attempt_number",
            id=execution_id,
        )
        return ExecutionState(
            status=row["status"],
            worker_id=row["worker_id"],
            attempts=tuple((int(a["attempt_number"]), a["status"]) for a in attempts),
            run_at_in=float(row["run_at_in"]),
            lease_in=None if row["lease_in"] is None else float(row["lease_in"]),
        )
