"""Statuses of jobs, executions and attempts, and the one execution transition table.

Every writer of ``executions.status`` (API cancel, worker claim/finalize, promoter,
reclaimer) checks its change against :data:`EXECUTION_TRANSITIONS` through
:func:`check_transition`; SQL statements additionally guard on the expected current status
so a concurrent writer can never apply a transition the table forbids.
"""

from __future__ import annotations

from enum import StrEnum

from chalicelib.errors import InvalidTransition


class EndpointType(StrEnum):
    """Where an endpoint delivers."""

    HTTP = "HTTP"  #: an HTTP request to a URL
    KAFKA = "KAFKA"  #: a message produced to a Kafka topic
    REDIS_STREAM = "REDIS_STREAM"  #: an entry appended to a Redis Stream with XADD


class TriggerType(StrEnum):
    """How a job fires."""

    IMMEDIATE = "IMMEDIATE"  #: once, now (setTimeout(fn, 0))
    DELAYED = "DELAYED"  #: once, at run_at (setTimeout(fn, delay))
    CRON = "CRON"  #: on a cron schedule until retired (setInterval)


class JobStatus(StrEnum):
    """Stored for cron jobs; a one-shot job's is its execution's (the ``job_states`` view)."""

    ACTIVE = "ACTIVE"  #: cron: ticks materialize; one-shot: its execution is not terminal
    RETIRED = "RETIRED"  #: cron: cancelled, replaced or past ends_at; one-shot: finished


class ExecutionStatus(StrEnum):
    """Lifecycle of one fire of a job."""

    PENDING = "PENDING"  #: DELAYED, waiting for run_at (the promoter queues it)
    QUEUED = "QUEUED"  #: due; a worker may claim it
    RUNNING = "RUNNING"  #: claimed by a worker; an attempt is in flight
    RETRYING = "RETRYING"  #: an attempt failed; waits until run_at for the next one
    SUCCESS = "SUCCESS"  #: terminal: an attempt succeeded
    FAILED = "FAILED"  #: terminal: attempts exhausted or a non-retryable failure
    CANCELLED = "CANCELLED"  #: terminal: cancelled before it ran

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATUSES


class AttemptStatus(StrEnum):
    SUCCESS = "SUCCESS"
    FAILED = "FAILED"


class LogLevel(StrEnum):
    DEBUG = "DEBUG"
    INFO = "INFO"
    WARN = "WARN"
    ERROR = "ERROR"


S = ExecutionStatus

TERMINAL_STATUSES = frozenset({S.SUCCESS, S.FAILED, S.CANCELLED})
CLAIMABLE_STATUSES = frozenset({S.QUEUED, S.RETRYING})
CANCELLABLE_STATUSES = frozenset({S.PENDING, S.QUEUED, S.RETRYING})

#: The only allowed status changes. RUNNING -> RETRYING/FAILED is also how the stuck
#: reclaimer returns an expired lease; RUNNING -> RUNNING does not exist (a re-claim goes
#: through RETRYING). FAILED -> QUEUED is an operator's retry or redrive (a dead letter
#: given a new attempt budget); SUCCESS and CANCELLED are final for good.
EXECUTION_TRANSITIONS: dict[ExecutionStatus, frozenset[ExecutionStatus]] = {
    S.PENDING: frozenset({S.QUEUED, S.CANCELLED}),
    S.QUEUED: frozenset({S.RUNNING, S.CANCELLED}),
    S.RUNNING: frozenset({S.SUCCESS, S.FAILED, S.RETRYING}),
    S.RETRYING: frozenset({S.RUNNING, S.CANCELLED}),
    S.SUCCESS: frozenset(),
    S.FAILED: frozenset({S.QUEUED}),
    S.CANCELLED: frozenset(),
}


def can_transition(current: ExecutionStatus | str, target: ExecutionStatus | str) -> bool:
    return ExecutionStatus(target) in EXECUTION_TRANSITIONS[ExecutionStatus(current)]


def check_transition(current: ExecutionStatus | str, target: ExecutionStatus | str) -> None:
    """Raise InvalidTransition (409) unless ``current -> target`` is in the table."""
    if not can_transition(current, target):
        raise InvalidTransition(
            f"Execution cannot go from {ExecutionStatus(current)} to {ExecutionStatus(target)}."
        )


def requeue_sources() -> list[str]:
    """The terminal statuses an operator may requeue (retry, redrive): the guard of those
    UPDATEs, read from the table (FAILED today)."""
    return [s for s in sources_of(S.QUEUED) if ExecutionStatus(s).is_terminal]


def promotion_sources() -> list[str]:
    """The live statuses the scheduler moves to QUEUED (PENDING): the promoter's guard.
    A dead letter is requeued by an operator only, never by a loop."""
    return [s for s in sources_of(S.QUEUED) if not ExecutionStatus(s).is_terminal]


def sources_of(target: ExecutionStatus) -> list[str]:
    """Statuses from which ``target`` is reachable: the WHERE guard of an UPDATE."""
    return sorted(str(s) for s, targets in EXECUTION_TRANSITIONS.items() if target in targets)
