"""The worker's one port to its database: :class:`WorkerStore`, and the values it speaks in.

Every stage of the worker's ring that reads or writes the database does so through the
store it was built with, in the worker's own terms: claim into a reserved room
(:class:`ClaimPlan`), claim the metered endpoints, record a batch of finished executions
(and, given a plan, claim into the room it frees, in the same statement or transaction),
renew leases, list the controlled endpoints, read a config, read secrets. It answers with
the worker's own types (:class:`~chalicelib.worker.models.ClaimedExecution`, sets of ids),
never with SQL rows.

Two implementations: :class:`chalicelib.worker.postgres.PostgresStore` (the named SQL and
claim strategies; what the deployed worker uses, built in ``chalicelib.wiring.worker``) and
:class:`chalicelib.worker.memory.InMemoryStore` (dicts under one lock, for fast tests of
the stages; never imported by the deployed app). One conformance suite runs against both
(``tests/integration/worker/test_store_conformance.py``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any, Protocol

from chalicelib.worker.models import ClaimedExecution, FinishedExecution


@dataclass(frozen=True, kw_only=True)
class ClaimLimits:
    """What a claim may take besides its batch size, and the lease it starts."""

    lease_ms: int = 300_000  #: TE_STUCK_EXECUTION_TIMEOUT_SEC
    default_cap: int = 10_000  #: per-endpoint cap when the endpoint sets no max_concurrent
    full: tuple[str, ...] = ()  #: endpoints at their cap in this worker: not claimed
    busy: Mapping[str, int] = field(default_factory=dict)  #: endpoint -> deliveries held
    #: Endpoints paused, held or flow-controlled as this worker last read them
    #: (:mod:`chalicelib.worker.flow`): kept out of the fast claim's LIMIT like ``full``.
    excluded: tuple[str, ...] = ()
    #: Room of this worker's other claims in flight (taken from any endpoint, as far as this
    #: one knows): every endpoint's share is that much smaller (:mod:`chalicelib.worker.room`).
    pending: int = 0

    def params(self) -> dict[str, Any]:
        """The claim statements' parameters (:mod:`chalicelib.worker.strategies`)."""
        return {
            "lease_ms": self.lease_ms,
            "default_cap": self.default_cap,
            "full": [*self.full, *self.excluded],
            "busy": json.dumps(self.busy, separators=(",", ":")),
            "pending": self.pending,
        }

    @property
    def capped(self) -> bool:
        """An endpoint is at its cap here: the candidates come per endpoint, not from the walk
        past its backlog (the ``_capped`` statements, worker_capped.sql)."""
        return bool(self.full)

    def share(self, endpoint: str, endpoint_cap: int | None) -> int:
        """How many of ``endpoint``'s due executions a claim may take: its cap (its own
        ``max_concurrent``, else :attr:`default_cap`) less what this worker delivers for it
        and less the room of claims in flight; none if it is full or excluded."""
        if endpoint in self.full or endpoint in self.excluded:
            return 0
        cap = self.default_cap if endpoint_cap is None else endpoint_cap
        return cap - self.busy.get(endpoint, 0) - self.pending


NO_LIMITS = ClaimLimits()


@dataclass(frozen=True)
class ClaimPlan:
    """A claim's reserved room, sized before the transaction that runs it."""

    room: int
    limits: ClaimLimits
    started: float  #: the ledger's clock before the transaction (the lease's local start)


@dataclass(frozen=True)
class Recording:
    """A batch of finished executions to record, with what it asks of their endpoints:
    the Retry-After holds (endpoint -> ms, the longest) and the 410s (paused ``gone``).
    ``alone``: nothing follows these ends and no endpoint is held or gone, so a store may
    record it by one statement sent alone."""

    batch: list[FinishedExecution]
    holds: dict[str, int]
    gone: list[str]
    alone: bool

    @classmethod
    def of(cls, batch: list[FinishedExecution]) -> Recording:
        holds = _holds(batch)
        gone = sorted({f.endpoint for f in batch if f.gone})
        alone = not holds and not gone and not any(f.follows for f in batch)
        return cls(batch=batch, holds=holds, gone=gone, alone=alone)

    @cached_property
    def payload(self) -> str:
        """The batch as one JSON array (worker_finalize_batch's ``:results``), encoded once
        however often the record is retried."""
        return json.dumps([f.to_json() for f in self.batch], separators=(",", ":"))


def _holds(batch: list[FinishedExecution]) -> dict[str, int]:
    """endpoint -> the longest Retry-After hold its results in ``batch`` ask for."""
    holds: dict[str, int] = {}
    for finished in batch:
        if finished.hold_ms is not None:
            holds[finished.endpoint] = max(holds.get(finished.endpoint, 0), finished.hold_ms)
    return holds


@dataclass(frozen=True)
class Controlled:
    """The endpoints a worker keeps out of its fast claim (sorted by name)."""

    excluded: tuple[str, ...] = ()  #: paused, held or flow-controlled
    metered: tuple[str, ...] = ()  #: of those, the flow-controlled ones


@dataclass(frozen=True)
class StoredSecret:
    """A secret as stored: encrypted (the secret cache decrypts it), with the value its
    last rotation replaced and when."""

    name: str
    encrypted_value: bytes = field(repr=False)
    previous_encrypted_value: bytes | None = field(default=None, repr=False)
    rotated_at: datetime | None = None


class WorkerStore(Protocol):
    """What the worker's stages need of the database (see the module)."""

    @property
    def worker_id(self) -> str:
        """The worker whose claims, records and leases these are."""
        ...

    @property
    def records_with_claim(self) -> bool:
        """Whether a batch recorded :attr:`Recording.alone` can claim in the same call
        (one statement); if not, only a batch with something following it refills."""
        ...

    def claim(self, plan: ClaimPlan) -> list[ClaimedExecution]:
        """Due QUEUED or RETRYING executions, oldest first, up to the plan's room and each
        endpoint's share, moved to RUNNING under this worker with a lease (one commit)."""
        ...

    def claim_metered(self, plan: ClaimPlan, names: tuple[str, ...]) -> list[ClaimedExecution]:
        """:meth:`claim` for the flow-controlled endpoints ``names``, within their
        cluster-wide limits."""
        ...

    def record(
        self, recording: Recording, plan: ClaimPlan | None
    ) -> tuple[set[str], list[ClaimedExecution]]:
        """Record a batch's attempts and move each execution on (only those RUNNING under
        this worker at that attempt), hold and pause the endpoints it asks to, and with a
        ``plan`` claim into it, in one commit: (the executions recorded, those claimed)."""
        ...

    def renew(self, ids: list[str], lease_ms: int) -> set[str]:
        """Extend by ``lease_ms`` the leases of ``ids`` still RUNNING under this worker;
        returns those (the rest were taken back)."""
        ...

    def controlled(self) -> Controlled:
        """The endpoints paused, held (now) or flow-controlled."""
        ...

    def config_values(self, name: str) -> dict[str, Any] | None:
        """A config's values, None if there is no such config."""
        ...

    def secrets(self, names: list[str]) -> list[StoredSecret]:
        """The secrets of ``names`` that exist, encrypted."""
        ...
