"""What the worker passes between its stages: a claimed execution and a finished attempt."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from chalicelib.domain.backoff import RetryPolicy
from chalicelib.domain.delivery import DeliveryErrorType
from chalicelib.domain.job_delivery import is_expired, overridden_policy
from chalicelib.domain.job_headers import credential_values
from chalicelib.domain.loops import UNPROCESSABLE, fault_reason
from chalicelib.domain.statuses import AttemptStatus, ExecutionStatus, LogLevel


@dataclass(frozen=True, kw_only=True)
class ClaimedExecution:
    """One execution this worker moved to RUNNING, with everything its pipeline needs."""

    execution_id: str
    job_id: str
    endpoint: str
    endpoint_type: str
    input: Any  #: any JSON value ({} when the job has none)
    attempt: int  #: the attempt this claim runs (attempt_count after the claim)
    max_attempts: int
    config_snapshot: Mapping[str, Any] | None
    endpoint_snapshot: Mapping[str, Any]
    #: The endpoint's own ``spec.max_concurrent``: how many of its deliveries one worker
    #: runs at once (None: the worker's default share, :mod:`chalicelib.worker.ledger`).
    endpoint_cap: int | None = None
    #: Why this worker cannot process the execution (its row could not be read): it is
    #: finalized FAILED (``UNPROCESSABLE``) without a delivery. None for a sound row.
    fault: str | None = None
    #: Its end has something to follow it (a callback, a batch): finalized in a transaction
    #: of its own rather than by one statement sent alone (the "claimed" part, parts.sql).
    follows: bool = True
    #: The snapshot's retry policy as read at the claim (None: read on use).
    policy: RetryPolicy | None = None
    #: The job's own headers (None: none), sent with each delivery, and the values among
    #: them that are credentials (redacted from what the attempt records).
    headers: Mapping[str, str] | None = None
    credentials: tuple[str, ...] = ()
    #: The job's W3C trace context (None: none): each attempt sends its own parent-id.
    traceparent: str | None = None
    tracestate: str | None = None
    #: The job's own delivery settings (:mod:`chalicelib.domain.job_delivery`), or None.
    overrides: Mapping[str, Any] | None = None
    #: A first attempt of a job with ``expire_after``: how late after its due time the
    #: claim started it (ms, the database's clock); None otherwise.
    late_ms: int | None = None
    #: A retried execution: how long before the claim its first attempt started (ms).
    retry_elapsed_ms: int | None = None
    #: time.monotonic() when the claim was read: the two above grow from here.
    claimed_at: float = 0.0

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ClaimedExecution:
        """The claimed row; a row whose fields cannot be read is still returned (the claim
        committed it RUNNING under this worker), as a ``fault`` to finalize FAILED."""
        try:
            return cls._parse(row)
        except Exception as exc:  # this row only: the rest of the claim goes on
            return cls._unreadable(row, fault_reason(exc))

    @classmethod
    def _parse(cls, row: Mapping[str, Any]) -> ClaimedExecution:
        raw = row["endpoint_snapshot"]
        snapshot = parse_snapshot(raw)
        if not isinstance(snapshot, Mapping):
            raise TypeError(f"endpoint snapshot is a {type(snapshot).__name__}, not an object")
        # Read here, once per distinct snapshot: a policy the worker cannot read makes the
        # row a fault (FAILED unsent), not a failure after its delivery.
        policy = snapshot_policy(raw, snapshot)
        claimed = object.__new__(cls)
        # What the frozen dataclass's __init__ would do, without its object.__setattr__ per
        # field (21 of them, for every claimed row). A field left out of __dict__ reads its
        # class-level default: the job's own fields (headers, trace context, overrides,
        # deadlines) are set only when the row carries them, which most rows do not.
        fields = claimed.__dict__
        fields.update(
            execution_id=row["execution_id"],
            job_id=row["job_id"],
            endpoint=row["endpoint"],
            endpoint_type=row["endpoint_type"],
            input={} if row["input"] is None else row["input"],
            attempt=int(row["attempt_count"]),
            max_attempts=int(row["max_attempts"]),
            config_snapshot=row["config_snapshot"],
            endpoint_snapshot=snapshot,
            endpoint_cap=row.get("endpoint_cap"),
            follows=row.get("follows") is not False,
            policy=policy,
            claimed_at=time.monotonic(),
        )
        for column, field in _OPTIONAL_COLUMNS:
            value = row.get(column)
            if value is not None:
                fields[field] = value
        headers = fields.get("headers")
        if headers is not None:
            if not isinstance(headers, Mapping):
                raise TypeError(f"job headers are a {type(headers).__name__}, not an object")
            fields["credentials"] = credential_values(headers)
        overrides = fields.get("overrides")
        if overrides is not None:
            merged = overridden_policy(snapshot.get("retry_policy"), overrides)
            fields["policy"] = RetryPolicy.from_json(merged)
        return claimed

    @classmethod
    def _unreadable(cls, row: Mapping[str, Any], fault: str) -> ClaimedExecution:
        """Only what finalizing it needs (every column the claim returns is NOT NULL)."""
        return cls(
            execution_id=str(row["execution_id"]),
            job_id=str(row.get("job_id")),
            endpoint=str(row.get("endpoint")),
            endpoint_type=str(row.get("endpoint_type")),
            input={},
            attempt=int(row["attempt_count"]),
            max_attempts=1,
            config_snapshot=None,
            endpoint_snapshot={},
            fault=fault,
        )

    @property
    def spec(self) -> Mapping[str, Any]:
        return self.endpoint_snapshot.get("spec") or {}

    @property
    def config_ref(self) -> str | None:
        ref = self.endpoint_snapshot.get("config_ref")
        return str(ref) if ref else None

    def since_claim_ms(self) -> float:
        return (time.monotonic() - self.claimed_at) * 1000

    def expired(self) -> bool:
        """A first attempt of a job with ``expire_after`` that would start too late now."""
        if self.late_ms is None:
            return False
        return is_expired(self.overrides, self.late_ms + self.since_claim_ms())

    def retry_elapsed_now_ms(self) -> int:
        """How long ago the execution's first attempt started (this one's claim, if first)."""
        return int((self.retry_elapsed_ms or 0) + self.since_claim_ms())

    @property
    def retry_policy(self) -> RetryPolicy:
        """The snapshot's policy with the job's own fields over it; max_attempts comes from
        the execution row (the reclaimer decides RETRYING vs FAILED from the same column)."""
        policy = self.policy or RetryPolicy.from_json(self.endpoint_snapshot.get("retry_policy"))
        return dataclasses.replace(policy, max_attempts=self.max_attempts)


#: The claim's per-job columns (the "claim_rows" part, parts.sql), NULL for most jobs, and the
#: ClaimedExecution field each one sets when it is not.
_OPTIONAL_COLUMNS = (
    ("job_headers", "headers"),
    ("traceparent", "traceparent"),
    ("tracestate", "tracestate"),
    ("delivery_overrides", "overrides"),
    ("late_ms", "late_ms"),
    ("retry_elapsed_ms", "retry_elapsed_ms"),
)


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
            _POLICIES.clear()
        parsed = _SNAPSHOTS[raw] = json.loads(raw) or {}
    return parsed


def snapshot_policy(raw: str | None, snapshot: Mapping[str, Any]) -> RetryPolicy:
    """The retry policy of a parsed snapshot, read once per distinct text (raises if it
    cannot be read; nothing is kept then)."""
    key = raw or ""
    policy = _POLICIES.get(key)
    if policy is None:
        policy = _POLICIES[key] = RetryPolicy.from_json(snapshot.get("retry_policy"))
    return policy


#: Distinct snapshot texts kept parsed (the cache is emptied when full). Plain dict: single
#: get/set operations are atomic, and two threads parsing one text both get a correct value.
SNAPSHOT_CACHE_SIZE = 256
_SNAPSHOTS: dict[str, Mapping[str, Any]] = {}
#: The retry policies of those texts (emptied with them).
_POLICIES: dict[str, RetryPolicy] = {}


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
    #: An HTTP target answered 410 Gone: the finalize pauses the endpoint (GONE).
    gone: bool = False
    #: A callback or batch follows its end (:attr:`ClaimedExecution.follows`).
    follows: bool = True

    @classmethod
    def of(cls, fields: dict[str, Any]) -> FinishedExecution:
        """What ``FinishedExecution(**fields)`` builds, without the frozen dataclass's
        object.__setattr__ per field (one is built per delivery); a field not in ``fields``
        reads its class-level default. ``fields`` must hold every field without one."""
        finished = object.__new__(cls)
        finished.__dict__.update(fields)
        return finished

    def unprocessable(self, reason: str) -> FinishedExecution:
        """This attempt recorded as FAILED ``UNPROCESSABLE`` instead (its own record was
        refused: :mod:`chalicelib.worker.finalizer`), without output or config snapshot."""
        return dataclasses.replace(
            self,
            attempt_status=AttemptStatus.FAILED,
            next_status=ExecutionStatus.FAILED,
            output=None,
            error={"type": UNPROCESSABLE, "message": reason},
            retry_delay_ms=None,
            config_snapshot=None,
            hold_ms=None,
            gone=False,  # nothing but the record: what failed may have been the pause
            log_level=LogLevel.ERROR,
            log_message=f"Attempt {self.attempt_number} ended but its result could not be "
            f"recorded ({reason}); the delivery may have been made. Execution FAILED "
            f"({UNPROCESSABLE}).",
        )

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


def unprocessable(
    claimed: ClaimedExecution, reason: str, at: datetime, *, sent: bool = False
) -> FinishedExecution:
    """A claimed execution this worker cannot process, finalized FAILED ``UNPROCESSABLE``
    with a log line saying why: it shows in the dead-letter view (where it may be retried
    once fixed) and never comes back to a claim. ``sent``: the request went out before the
    failure (the attempt's outcome could not be handled)."""
    what = "was sent, but its outcome could not be handled" if sent else "was not made"
    return _failed_at_once(
        claimed,
        at,
        UNPROCESSABLE,
        reason,
        f"Attempt {claimed.attempt} {what}: the worker cannot process this execution "
        f"({reason}). Execution FAILED ({UNPROCESSABLE}).",
    )


def expired(claimed: ClaimedExecution, at: datetime) -> FinishedExecution:
    """A first attempt that would start later than its job's ``expire_after`` allows:
    finalized FAILED ``EXPIRED`` without being sent (callbacks and batches follow as for
    any failure)."""
    after = (claimed.overrides or {}).get("expire_after_ms")
    message = f"not started within expire_after ({after} ms) of its due time; never delivered"
    return _failed_at_once(
        claimed,
        at,
        str(DeliveryErrorType.EXPIRED),
        message,
        f"Attempt {claimed.attempt} was not made: the execution {message}. "
        f"Execution FAILED ({DeliveryErrorType.EXPIRED}).",
    )


def _failed_at_once(
    claimed: ClaimedExecution, at: datetime, error_type: str, message: str, log_message: str
) -> FinishedExecution:
    """The attempt FAILED in no time at ``at``, and the execution with it: no retry."""
    return FinishedExecution(
        execution_id=claimed.execution_id,
        endpoint=claimed.endpoint,
        attempt_number=claimed.attempt,
        attempt_status=AttemptStatus.FAILED,
        next_status=ExecutionStatus.FAILED,
        started_at=at,
        completed_at=at,
        duration_ms=0,
        error={"type": error_type, "message": message},
        follows=claimed.follows,
        log_level=LogLevel.ERROR,
        log_message=log_message,
    )
