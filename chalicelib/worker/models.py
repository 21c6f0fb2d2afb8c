"""What the worker passes between its stages: a claimed execution and a finished attempt."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from chalicelib.domain.backoff import RetryPolicy
from chalicelib.domain.statuses import AttemptStatus, ExecutionStatus, LogLevel


@dataclass(frozen=True, kw_only=True)
class ClaimedExecution:
    """One execution this worker moved to RUNNING, with everything its pipeline needs."""

    execution_id: str
    job_id: str
    endpoint: str
    endpoint_type: str
    input: Mapping[str, Any]
    attempt: int  #: the attempt this claim runs (attempt_count after the claim)
    max_attempts: int
    config_snapshot: Mapping[str, Any] | None
    endpoint_snapshot: Mapping[str, Any]
    #: How many of this endpoint's deliveries one worker runs at once (claim fairness).
    endpoint_cap: int | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ClaimedExecution:
        return cls(
            execution_id=row["execution_id"],
            job_id=row["job_id"],
            endpoint=row["endpoint"],
            endpoint_type=row["endpoint_type"],
            input=row["input"] or {},
            attempt=int(row["attempt_count"]),
            max_attempts=int(row["max_attempts"]),
            config_snapshot=row["config_snapshot"],
            endpoint_snapshot=parse_snapshot(row["endpoint_snapshot"]),
            endpoint_cap=row.get("endpoint_cap"),
        )

    @property
    def spec(self) -> Mapping[str, Any]:
        return self.endpoint_snapshot.get("spec") or {}

    @property
    def config_ref(self) -> str | None:
        ref = self.endpoint_snapshot.get("config_ref")
        return str(ref) if ref else None

    @property
    def retry_policy(self) -> RetryPolicy:
        """The snapshot's policy; max_attempts comes from the execution row (the reclaimer
        decides RETRYING vs FAILED from the same column)."""
        policy = RetryPolicy.from_json(self.endpoint_snapshot.get("retry_policy"))
        return dataclasses.replace(policy, max_attempts=self.max_attempts)


def parse_snapshot(raw: str | None) -> Mapping[str, Any]:
    """An endpoint snapshot from its JSON text, parsed once per distinct text.

    The parsed mapping is shared between executions: nothing downstream mutates it
    (template resolution builds new objects).
    """
    if raw is None:
        return {}
    parsed = _SNAPSHOTS.get(raw)
    if parsed is None:
        if len(_SNAPSHOTS) >= SNAPSHOT_CACHE_SIZE:
            _SNAPSHOTS.clear()
        parsed = _SNAPSHOTS[raw] = json.loads(raw) or {}
    return parsed


#: Distinct snapshot texts kept parsed (the cache is emptied when full). Plain dict: single
#: get/set operations are atomic, and two threads parsing one text both get a correct value.
SNAPSHOT_CACHE_SIZE = 256
_SNAPSHOTS: dict[str, Mapping[str, Any]] = {}


@dataclass(frozen=True, kw_only=True)
class FinishedExecution:
    """One attempt's record and the execution's next status, ready to be finalized."""

    execution_id: str
    endpoint: str
    attempt_number: int
    attempt_status: AttemptStatus
    next_status: ExecutionStatus
    started_at: datetime
    completed_at: datetime
    duration_ms: int
    output: Mapping[str, Any] | None = None
    error: Mapping[str, Any] | None = None
    retry_delay_ms: int | None = None
    config_snapshot: Mapping[str, Any] | None = None
    log_level: LogLevel = LogLevel.INFO
    log_message: str = ""
    #: A 429/503 Retry-After (ms, capped): the whole endpoint is held back this long.
    hold_ms: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The element of worker_finalize_batch's JSONB array (absent keys read as NULL)."""
        data: dict[str, Any] = {
            "execution_id": self.execution_id,
            "attempt_number": self.attempt_number,
            "attempt_status": str(self.attempt_status),
            "next_status": str(self.next_status),
            "started_at": self.started_at.isoformat(),
            "completed_at": self.completed_at.isoformat(),
            "duration_ms": self.duration_ms,
            "log_level": str(self.log_level),
            "log_message": self.log_message,
        }
        optional = {
            "output": self.output,
            "error": self.error,
            "retry_delay_ms": self.retry_delay_ms,
            "config_snapshot": self.config_snapshot,
        }
        data.update({k: v for k, v in optional.items() if v is not None})
        return data
