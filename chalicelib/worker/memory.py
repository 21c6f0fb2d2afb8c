"""The worker's store in memory: :class:`InMemoryStore`, for fast tests of the ring's stages.

Endpoints and executions live in dicts of one :class:`MemoryData` under one lock; every
store method is one step under that lock, as each PostgreSQL call is one commit. It keeps
the rules the conformance suite checks against both stores
(``tests/integration/worker/test_store_conformance.py``):

* a claim takes due QUEUED or RETRYING executions, oldest first (``run_at``, then the
  order they were added), up to the plan's room, never one twice, passing over endpoints
  paused, held (until their hold ends), flow-controlled, full or excluded, and taking from
  each endpoint at most its share (:meth:`ClaimLimits.share`: its ``max_concurrent`` or
  the default cap, less ``busy`` and ``pending``); each moves to RUNNING under this worker
  with a lease of ``lease_ms`` and its attempt count one higher;
* a record moves only executions RUNNING under this worker at that attempt: it writes the
  attempt, sets the next status (a RETRYING one due ``retry_delay_ms`` from now, with no
  worker), holds an endpoint for a result's ``hold_ms``, pauses it for a 410 (``gone``),
  and then, given a plan, claims into it in the same step;
* a renewal extends only this worker's RUNNING leases;
* the controlled endpoints are the paused, held or flow-controlled ones, by name.

What it does not do, and refuses with :class:`NotImplementedError` rather than ignore:
callbacks, batches, ordering and concurrency keys (an execution that has one cannot be
added), and the metered claim (a flow-controlled endpoint's rate limit and cluster-wide
concurrency: :meth:`InMemoryStore.claim_metered`). It keeps no summary rows, logs or
region. Only tests import it (an import-linter contract keeps the deployed app from it).
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from chalicelib.domain.clock import utcnow
from chalicelib.worker.models import ClaimedExecution, FinishedExecution
from chalicelib.worker.store import ClaimPlan, Controlled, Recording, StoredSecret

WAITING = ("QUEUED", "RETRYING")


@dataclass
class MemoryEndpoint:
    """An endpoint as a claim sees it."""

    name: str
    endpoint_type: str = "HTTP"
    spec: dict[str, Any] = field(default_factory=dict)
    retry_policy: dict[str, Any] = field(default_factory=dict)
    paused: bool = False
    paused_reason: str | None = None
    held_until: datetime | None = None
    flow_controlled: bool = False

    @property
    def cap(self) -> int | None:
        value = self.spec.get("max_concurrent")
        return None if value is None else int(value)

    def snapshot(self) -> str:
        """The job's endpoint snapshot, as the claim returns it (JSON text)."""
        return json.dumps(
            {
                "name": self.name,
                "type": self.endpoint_type,
                "spec": self.spec,
                "retry_policy": self.retry_policy,
                "config_ref": None,
                "payload_spec_ref": None,
            }
        )


@dataclass(frozen=True)
class MemoryAttempt:
    """An attempt as recorded."""

    attempt_number: int
    status: str
    error_type: str | None
    log_message: str


@dataclass
class MemoryExecution:
    """An execution's row."""

    execution_id: str
    job_id: str
    endpoint: str
    run_at: datetime
    order: int  #: the order it was added in: ties on run_at go oldest first
    status: str = "QUEUED"
    input: Any = None
    max_attempts: int = 3
    attempt_count: int = 0
    worker_id: str | None = None
    lease_expires_at: datetime | None = None
    output: Any = None
    completed_at: datetime | None = None
    attempts: list[MemoryAttempt] = field(default_factory=list)


class MemoryData:
    """The rows every :class:`InMemoryStore` over it shares, under one lock."""

    def __init__(self, clock: Callable[[], datetime] = utcnow) -> None:
        self.clock = clock
        self.lock = threading.RLock()
        self.endpoints: dict[str, MemoryEndpoint] = {}
        self.executions: dict[str, MemoryExecution] = {}
        self.configs: dict[str, dict[str, Any]] = {}
        self.secrets: dict[str, StoredSecret] = {}
        #: The executions a claim may take (QUEUED or RETRYING): claims never scan history.
        self.waiting: set[str] = set()
        self._ids = itertools.count(1)

    def add_endpoint(self, endpoint: MemoryEndpoint) -> MemoryEndpoint:
        with self.lock:
            self.endpoints[endpoint.name] = endpoint
        return endpoint

    def add_execution(
        self,
        endpoint: str,
        *,
        run_at: datetime | None = None,
        execution_id: str | None = None,
        max_attempts: int = 3,
        input: Any = None,
        **follow_ups: Any,
    ) -> MemoryExecution:
        """A QUEUED execution of ``endpoint``, due at ``run_at`` (now unless told).
        ``follow_ups`` (a callback, a batch, an ordering or concurrency key) are refused."""
        if follow_ups:
            raise NotImplementedError(
                f"the in-memory store keeps no callbacks, batches or keys: {sorted(follow_ups)}"
            )
        with self.lock:
            order = next(self._ids)
            execution = MemoryExecution(
                execution_id=execution_id or f"mem-{order}",
                job_id=f"job-{order}",
                endpoint=endpoint,
                run_at=self.clock() if run_at is None else run_at,
                order=order,
                input={} if input is None else input,
                max_attempts=max_attempts,
            )
            self.executions[execution.execution_id] = execution
            self.waiting.add(execution.execution_id)
        return execution

    def take_back(self, execution_id: str) -> None:
        """What the reclaimer does to an expired lease: RUNNING back to RETRYING, due now,
        owned by no worker."""
        with self.lock:
            execution = self.executions[execution_id]
            execution.status, execution.worker_id = "RETRYING", None
            execution.run_at, execution.lease_expires_at = self.clock(), None
            self.waiting.add(execution_id)


class InMemoryStore:
    """A :class:`~chalicelib.worker.store.WorkerStore` over :class:`MemoryData` (see the
    module for what it does and what it refuses)."""

    records_with_claim = True  #: a record and its refill are one step, as on PostgreSQL

    def __init__(self, worker_id: str = "memory-worker", data: MemoryData | None = None) -> None:
        self._worker_id = worker_id
        self.data = data or MemoryData()

    @property
    def worker_id(self) -> str:
        return self._worker_id

    def for_worker(self, worker_id: str) -> InMemoryStore:
        """Another worker's store over the same rows."""
        return InMemoryStore(worker_id, self.data)

    # -- claims --------------------------------------------------------------------------

    def claim(self, plan: ClaimPlan) -> list[ClaimedExecution]:
        with self.data.lock:
            return self._claim(plan)

    def claim_metered(self, plan: ClaimPlan, names: tuple[str, ...]) -> list[ClaimedExecution]:
        raise NotImplementedError(
            "the in-memory store has no metered claim (flow control's rate limits and "
            "cluster-wide concurrency)"
        )

    def _claim(self, plan: ClaimPlan) -> list[ClaimedExecution]:
        now = self.data.clock()
        taken: Counter[str] = Counter()
        claimed: list[ClaimedExecution] = []
        for execution in self._due(now):
            if len(claimed) >= plan.room:
                break
            endpoint = self.data.endpoints[execution.endpoint]
            if not _claimable(endpoint, now):
                continue
            if taken[endpoint.name] >= plan.limits.share(endpoint.name, endpoint.cap):
                continue
            taken[endpoint.name] += 1
            claimed.append(self._take(execution, endpoint, now, plan.limits.lease_ms))
        return claimed

    def _due(self, now: datetime) -> list[MemoryExecution]:
        executions = self.data.executions
        due = [executions[i] for i in self.data.waiting if executions[i].run_at <= now]
        return sorted(due, key=lambda e: (e.run_at, e.order))

    def _take(
        self, execution: MemoryExecution, endpoint: MemoryEndpoint, now: datetime, lease_ms: int
    ) -> ClaimedExecution:
        execution.status, execution.worker_id = "RUNNING", self._worker_id
        execution.attempt_count += 1
        execution.lease_expires_at = now + timedelta(milliseconds=lease_ms)
        self.data.waiting.discard(execution.execution_id)
        return ClaimedExecution.from_row(
            {
                "execution_id": execution.execution_id,
                "job_id": execution.job_id,
                "endpoint": endpoint.name,
                "endpoint_type": endpoint.endpoint_type,
                "input": execution.input,
                "attempt_count": execution.attempt_count,
                "max_attempts": execution.max_attempts,
                "config_snapshot": None,
                "endpoint_snapshot": endpoint.snapshot(),
                "endpoint_cap": endpoint.cap,
                "follows": False,
            }
        )

    # -- records -------------------------------------------------------------------------

    def record(
        self, recording: Recording, plan: ClaimPlan | None
    ) -> tuple[set[str], list[ClaimedExecution]]:
        with self.data.lock:
            now = self.data.clock()
            recorded = {f.execution_id for f in recording.batch if self._record_one(f, now)}
            for name, hold_ms in recording.holds.items():
                self._hold(name, now + timedelta(milliseconds=hold_ms))
            for name in recording.gone:
                self._pause(name, "GONE")
            return recorded, [] if plan is None else self._claim(plan)

    def _record_one(self, finished: FinishedExecution, now: datetime) -> bool:
        """One result, if its execution is RUNNING under this worker at its attempt."""
        execution = self.data.executions.get(finished.execution_id)
        if execution is None or not self._holds(execution, finished.attempt_number):
            return False
        status = str(finished.next_status)
        execution.status = status
        if status == "SUCCESS":
            execution.output = finished.output
        if status in ("SUCCESS", "FAILED"):
            execution.completed_at = finished.completed_at
        if status == "RETRYING":
            execution.run_at = now + timedelta(milliseconds=finished.retry_delay_ms or 0)
            execution.worker_id = None
            self.data.waiting.add(execution.execution_id)
        execution.attempts.append(
            MemoryAttempt(
                attempt_number=finished.attempt_number,
                status=str(finished.attempt_status),
                error_type=None if finished.error is None else finished.error.get("type"),
                log_message=f"{finished.log_message} [worker {self._worker_id}]",
            )
        )
        return True

    def _holds(self, execution: MemoryExecution, attempt: int) -> bool:
        return (
            execution.status == "RUNNING"
            and execution.worker_id == self._worker_id
            and execution.attempt_count == attempt
        )

    def _hold(self, name: str, until: datetime) -> None:
        """Held until ``until``, never shortened (as worker_hold_endpoints)."""
        endpoint = self.data.endpoints.get(name)
        if endpoint is not None:
            current = endpoint.held_until
            endpoint.held_until = until if current is None else max(current, until)

    def _pause(self, name: str, reason: str) -> None:
        endpoint = self.data.endpoints.get(name)
        if endpoint is not None and not endpoint.paused:
            endpoint.paused, endpoint.paused_reason = True, reason

    # -- leases and reads ----------------------------------------------------------------

    def renew(self, ids: list[str], lease_ms: int) -> set[str]:
        with self.data.lock:
            now = self.data.clock()
            kept = set()
            for execution_id in ids:
                execution = self.data.executions.get(execution_id)
                if execution is not None and self._holds(execution, execution.attempt_count):
                    execution.lease_expires_at = now + timedelta(milliseconds=lease_ms)
                    kept.add(execution_id)
            return kept

    def controlled(self) -> Controlled:
        with self.data.lock:
            now = self.data.clock()
            names = sorted(self.data.endpoints)
            endpoints = [self.data.endpoints[name] for name in names]
            controlled = [e for e in endpoints if not _claimable(e, now)]
            return Controlled(
                excluded=tuple(e.name for e in controlled),
                metered=tuple(e.name for e in controlled if e.flow_controlled),
            )

    def config_values(self, name: str) -> dict[str, Any] | None:
        with self.data.lock:
            values = self.data.configs.get(name)
            return None if values is None else dict(values)

    def secrets(self, names: list[str]) -> list[StoredSecret]:
        with self.data.lock:
            return [self.data.secrets[name] for name in names if name in self.data.secrets]


def _claimable(endpoint: MemoryEndpoint, now: datetime) -> bool:
    """Not paused, not held now, not flow-controlled (those only a metered claim takes)."""
    held = endpoint.held_until is not None and endpoint.held_until > now
    return not (endpoint.paused or held or endpoint.flow_controlled)
