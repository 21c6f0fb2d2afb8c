"""Creating jobs, one or a thousand: the checks and the multi-row insert that ``POST /jobs``,
``POST /jobs/batch`` and completion callbacks share.

:func:`create_jobs` takes parsed requests and, inside the caller's transaction, answers
each with an :class:`Outcome`: created (201), an idempotency hit (200) or the error that
item would have raised on its own. The answers are ``POST /jobs``'s: the endpoint exists
(404), a known ``(endpoint, idempotency_key)`` returns the existing job whatever the body
(200), then callbacks (422) and the input against the payload spec (422). Keys are looked
up only where the answer depends on it: for items refused with a 422, and for items the
insert skipped because their key was taken.

Whatever the number of items, the database sees a fixed number of statements: one read of
the endpoints, one statement writing the jobs and their executions (``jobs_create``), and
an idempotency lookup before it (if an item was refused) and after it (if a key was
taken). ``POST /jobs`` usually skips all of this: see :mod:`chalicelib.services.job_fastpath`.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from chalicelib.db.connection import Row, Transaction
from chalicelib.db.queries import queries
from chalicelib.domain.endpoints import endpoint_snapshot
from chalicelib.domain.jobs import JobRequest
from chalicelib.domain.payload_specs import validate_input
from chalicelib.domain.statuses import ExecutionStatus, JobStatus, TriggerType
from chalicelib.errors import EndpointNotFound, InvalidCallback, TaskExecutorError
from chalicelib.services.views import ExecutionSummary, Job

#: Deepest chain of callbacks: a job's callback is depth 1, the callback's callback 2, ...
MAX_CALLBACK_DEPTH = 3


@dataclass(frozen=True)
class JobView:
    """A job and the execution shown with it (one-shot: its execution; cron: latest)."""

    job: Job
    execution: ExecutionSummary | None = None

    @classmethod
    def from_rows(cls, job: Row, execution: Row | None = None) -> JobView:
        return cls(Job.from_row(job), ExecutionSummary.maybe(execution))

    @property
    def job_id(self) -> str:
        return self.job.job_id

    @property
    def created_at(self) -> datetime:
        """With :attr:`job_id`, the keyset a page of jobs is cut on."""
        return self.job.created_at


@dataclass(frozen=True)
class NewJob:
    """One job to create and where it comes from."""

    request: JobRequest
    batch_id: str | None = None
    parent_execution_id: str | None = None  #: a callback job: the execution it reports
    depth: int = 0  #: place in a chain of callbacks (0: created by a client)
    #: Created by the service (a callback): its input is the documented report, not checked
    #: against a payload spec, and default callbacks it cannot honour are dropped.
    system: bool = False


@dataclass(frozen=True)
class Outcome:
    """What became of one item: a job (created or found by its key) or an error."""

    view: JobView | None = None
    created: bool = False
    error: TaskExecutorError | None = None

    def raise_error(self) -> JobView:
        if self.error is not None:
            raise self.error
        assert self.view is not None
        return self.view


def new_id(prefix: str) -> str:
    """An id in the database's own form (``job_`` + 32 hex digits), chosen by the caller."""
    return prefix + secrets.token_hex(16)  # 32 hex digits, like the column defaults


class Endpoints:
    """The endpoints one transaction has read, by name (a missing one maps to None)."""

    def __init__(self, tx: Transaction, seen: Callable[[list[Row]], None] | None = None) -> None:
        self._tx = tx
        self._seen = seen  #: told of every endpoint row read (POST /jobs remembers them)
        self._rows: dict[str, Row | None] = {}
        self._snapshots: dict[str, dict[str, Any]] = {}

    def load(self, names: Iterable[str | None]) -> None:
        missing = sorted({n for n in names if n is not None and n not in self._rows})
        if missing:
            self._rows.update(dict.fromkeys(missing))
            rows = self._tx.run(queries["jobs_get_endpoints"], names=missing)
            for row in rows:
                self._rows[row["name"]] = row
            if self._seen is not None:
                self._seen(rows)

    def get(self, name: str) -> Row | None:
        self.load([name])
        return self._rows[name]

    def snapshot(self, endpoint: Row) -> dict[str, Any]:
        name = endpoint["name"]
        if name not in self._snapshots:
            self._snapshots[name] = endpoint_snapshot(endpoint)
        return self._snapshots[name]

    def chain_depth(self, names: Iterable[str], limit: int) -> int:
        """How many levels of callbacks follow from ``names`` through the endpoints'
        defaults, counted up to ``limit + 1`` (a cycle is endless, so over any limit)."""
        level, depth = {n for n in names if n}, 0
        while level and depth <= limit:
            depth += 1
            self.load(level)
            rows = [self._rows[n] for n in level]
            level = {r[k] for r in rows if r is not None for k in ("on_success", "on_failure")}
            level.discard(None)
        return depth


def check_callbacks(endpoints: Endpoints, names: Sequence[str | None], depth: int) -> None:
    """422 INVALID_CALLBACK if a named endpoint does not exist or the chain of callbacks
    (through the endpoints' default callbacks) would go deeper than MAX_CALLBACK_DEPTH."""
    named = [n for n in names if n]
    endpoints.load(named)
    for name in named:
        if endpoints.get(name) is None:
            raise InvalidCallback(f"Callback endpoint '{name}' does not exist.")
    room = MAX_CALLBACK_DEPTH - depth
    if endpoints.chain_depth(named, room) > room:
        raise InvalidCallback(
            f"Callbacks would chain deeper than {MAX_CALLBACK_DEPTH} levels "
            "(counting the endpoints' default callbacks)."
        )


def _callbacks(item: NewJob, endpoint: Row, endpoints: Endpoints) -> tuple[str | None, ...]:
    """The job's callbacks: its own, else its endpoint's defaults. A callback job at the
    deepest level gets none; one created by the service drops defaults it cannot honour."""
    names = (
        item.request.on_success or endpoint["on_success"],
        item.request.on_failure or endpoint["on_failure"],
    )
    if item.depth >= MAX_CALLBACK_DEPTH:
        return (None, None)
    try:
        check_callbacks(endpoints, names, item.depth)
    except InvalidCallback:
        if not item.system:
            raise
        return (None, None)
    return names


def job_row(
    item: NewJob, endpoint: Row, callbacks: tuple[str | None, ...], now: datetime
) -> dict[str, Any]:
    request = item.request
    row: dict[str, Any] = {
        "job_id": new_id("job_"),
        "endpoint": endpoint["name"],
        "endpoint_type": endpoint["endpoint_type"],
        "trigger_type": request.trigger.value,
        "idempotency_key": request.idempotency_key,
        "input": request.input,
        "run_at": request.run_at,
        "cron_expression": None,
        "cron_timezone": None,
        "cron_starts_at": None,
        "cron_ends_at": None,
        "cron_next_run_at": None,
        "endpoint_snapshot": None,  # filled by the caller (shared per endpoint)
        "version": 1,
        "previous_version_id": None,
        "batch_id": item.batch_id,
        "on_success": callbacks[0],
        "on_failure": callbacks[1],
        "parent_execution_id": item.parent_execution_id,
        "callback_depth": item.depth,
    }
    schedule = request.schedule
    if schedule is not None:
        row.update(
            cron_expression=schedule.expression,
            cron_timezone=schedule.timezone,
            cron_starts_at=schedule.starts_at,
            cron_ends_at=schedule.ends_at,
            cron_next_run_at=schedule.first_run(now),
        )
    return row


def json_rows(rows: list[dict[str, Any]]) -> str:
    """Rows as the JSONB array the multi-row statements read (timestamps as ISO 8601)."""
    return json.dumps(rows, separators=(",", ":"), default=_iso)


def create_params(jobs: list[dict[str, Any]], executions: list[dict[str, Any]]) -> dict[str, str]:
    """``jobs_create``'s parameters: the job rows without their endpoint snapshots, which
    go once per endpoint (``:snapshots``), nor their NULL columns (``->>`` of a missing key
    is NULL), and the execution rows."""
    snapshots = {job["endpoint"]: job["endpoint_snapshot"] for job in jobs}
    bare = [
        {k: v for k, v in job.items() if v is not None and k != "endpoint_snapshot"} for job in jobs
    ]
    return {
        "jobs": json_rows(bare),
        "snapshots": json.dumps(snapshots, separators=(",", ":")),
        "executions": json_rows(executions),
    }


def _iso(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def created_view(job: dict[str, Any], execution: dict[str, Any] | None, now: datetime) -> JobView:
    """The view of a job this transaction inserted, from what it inserted: the columns the
    database filled in are its defaults (created_at is the transaction's now())."""
    stored = {
        **job,
        "status": JobStatus.ACTIVE.value,
        "replaced_by_id": None,
        "cron_last_tick_at": None,
        "created_at": now,
        "retired_at": None,
        "paused_at": None,
    }
    summary = None
    if execution is not None:
        summary = {
            "execution_id": execution["execution_id"],
            "job_id": job["job_id"],
            "status": execution["status"],
            "attempt_count": 0,
            "run_at": execution["run_at"] or now,
            "started_at": None,
            "completed_at": None,
            "created_at": now,
        }
    return JobView.from_rows(stored, summary)


def execution_row(job: dict[str, Any]) -> dict[str, Any]:
    # IMMEDIATE is due now (QUEUED); DELAYED waits for the promoter (PENDING), even when
    # run_at is already past: the promoter queues it on its next pass.
    delayed = job["trigger_type"] == TriggerType.DELAYED
    status = ExecutionStatus.PENDING if delayed else ExecutionStatus.QUEUED
    return {
        "execution_id": new_id("exec_"),
        "job_id": job["job_id"],
        "endpoint": job["endpoint"],
        "endpoint_type": job["endpoint_type"],
        "idempotency_key": job["idempotency_key"],
        "status": status.value,
        "run_at": job["run_at"],
        "input": job["input"],
        "max_attempts": int(job["endpoint_snapshot"]["retry_policy"]["max_attempts"]),
        "batch_id": job["batch_id"],
        "on_success": job["on_success"],
        "on_failure": job["on_failure"],
    }


def views_of(tx: Transaction, jobs: Sequence[Row]) -> list[JobView]:
    """Jobs with their executions: one-shot jobs' in one read, a cron job's latest each."""
    one_shot = [j["job_id"] for j in jobs if j["trigger_type"] != TriggerType.CRON]
    executions: dict[str, Row] = {}
    if one_shot:
        for row in tx.run(queries["jobs_executions_of"], job_ids=one_shot):
            executions[row["job_id"]] = row
    views = []
    for job in jobs:
        execution = executions.get(job["job_id"])
        if job["trigger_type"] == TriggerType.CRON:
            execution = tx.one(queries["jobs_latest_execution"], job_id=job["job_id"])
        views.append(JobView.from_rows(job, execution))
    return views


def _key(request: JobRequest) -> tuple[str, str] | None:
    if request.idempotency_key is None:
        return None
    return (request.endpoint, request.idempotency_key)


def find_existing(tx: Transaction, keys: Iterable[tuple[str, str] | None]) -> dict[Any, JobView]:
    """Jobs already holding these (endpoint, idempotency_key) pairs, by pair."""
    pairs = sorted({k for k in keys if k is not None})
    if not pairs:
        return {}
    payload = json.dumps([{"endpoint": e, "key": k} for e, k in pairs])
    rows = tx.run(queries["jobs_find_by_idempotency_keys"], pairs=payload)
    return {(v.job.endpoint, v.job.idempotency_key): v for v in views_of(tx, rows)}


class _Plan:
    """The rows one call writes, and which item each belongs to."""

    def __init__(self) -> None:
        self.rows: dict[int, dict[str, Any]] = {}  #: item index -> job row
        self.twins: dict[int, int] = {}  #: item index -> earlier item with the same key
        self._first: dict[tuple[str, str], int] = {}

    def twin(self, index: int, request: JobRequest) -> bool:
        """True if an earlier item of this request holds the same key: this one is then
        answered with that item's job (200) whatever its body, as a repeat would be."""
        key = _key(request)
        first = None if key is None else self._first.get(key)
        if first is not None:
            self.twins[index] = first
        return first is not None

    def add(self, index: int, request: JobRequest, row: dict[str, Any]) -> None:
        key = _key(request)
        if key is not None:
            self._first[key] = index
        self.rows[index] = row


def _check(item: NewJob, endpoint: Row, endpoints: Endpoints, now: datetime) -> dict[str, Any]:
    """The item's job row, or the 422 its callbacks or input earn."""
    callbacks = _callbacks(item, endpoint, endpoints)
    if not item.system:
        validate_input(endpoint["payload_schema"], item.request.input)
    row = job_row(item, endpoint, callbacks, now)
    row["endpoint_snapshot"] = endpoints.snapshot(endpoint)
    return row


def create_jobs(
    tx: Transaction,
    items: Sequence[NewJob | TaskExecutorError],
    *,
    now: datetime,
    seen: Callable[[list[Row]], None] | None = None,
) -> list[Outcome]:
    """Create every valid item in ``tx``; one :class:`Outcome` per item, in order.

    An item given as an error (it failed parsing) is answered with it. Nothing is raised
    for an item: the caller decides whether one error fails the whole request. ``seen`` is
    told of the endpoint rows read.
    """
    outcomes: list[Outcome | None] = [
        Outcome(error=item) if isinstance(item, TaskExecutorError) else None for item in items
    ]
    todo = {i: item for i, item in enumerate(items) if isinstance(item, NewJob)}
    endpoints = Endpoints(tx, seen)
    endpoints.load(item.request.endpoint for item in todo.values())
    plan = _Plan()
    refused: dict[int, TaskExecutorError] = {}  #: 422s, unless their key is known (200)
    for index, item in todo.items():
        endpoint = endpoints.get(item.request.endpoint)
        if endpoint is None:
            error = EndpointNotFound(f"Endpoint '{item.request.endpoint}' does not exist.")
            outcomes[index] = Outcome(error=error)
        elif not plan.twin(index, item.request):
            try:
                plan.add(index, item.request, _check(item, endpoint, endpoints, now))
            except TaskExecutorError as exc:
                refused[index] = exc
    _answer_refused(tx, todo, refused, outcomes)
    _insert(tx, plan, outcomes)
    for index, first in plan.twins.items():
        outcomes[index] = Outcome(view=outcomes[first].view, created=False)  # type: ignore[union-attr]
    assert all(o is not None for o in outcomes)
    return [o for o in outcomes if o is not None]


def _answer_refused(
    tx: Transaction,
    todo: dict[int, NewJob],
    refused: dict[int, TaskExecutorError],
    outcomes: list[Outcome | None],
) -> None:
    """A known key wins over the item's 422 (200 with the job holding it), as for a valid
    item. Only refused items are looked up before the insert: a valid item with a known
    key finds its twin when the insert skips it (jobs_create's ON CONFLICT)."""
    if not refused:
        return
    existing = find_existing(tx, (_key(todo[i].request) for i in refused))
    for index, error in refused.items():
        found = existing.get(_key(todo[index].request))
        outcomes[index] = Outcome(error=error) if found is None else Outcome(view=found)


def _insert(tx: Transaction, plan: _Plan, outcomes: list[Outcome | None]) -> None:
    """One statement writes the jobs and their executions; a twin committed meanwhile is
    a 200."""
    if not plan.rows:
        return
    jobs = list(plan.rows.values())
    planned = [execution_row(r) for r in jobs if r["trigger_type"] != TriggerType.CRON]
    [written] = tx.run(queries["jobs_create"], **create_params(jobs, planned))
    inserted = set(written["job_ids"])
    executions = {e["job_id"]: e for e in planned}
    lost = [r for r in jobs if r["job_id"] not in inserted]
    twins = find_existing(tx, ((r["endpoint"], r["idempotency_key"]) for r in lost))
    for index, row in plan.rows.items():
        if row["job_id"] in inserted:
            view = created_view(row, executions.get(row["job_id"]), written["now"])
            outcomes[index] = Outcome(view=view, created=True)
        else:
            twin = twins[(row["endpoint"], row["idempotency_key"])]
            outcomes[index] = Outcome(view=twin, created=False)
