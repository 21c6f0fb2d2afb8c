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
taken). Inputs are validated before the transaction opens (:func:`check_inputs`), under
one time budget for the whole request. ``POST /jobs`` usually skips all of this: see
:mod:`chalicelib.services.jobs.fastpath`.
The rows and views themselves are built in :mod:`chalicelib.services.jobs.rows`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from chalicelib.db.connection import Database, Row, Transaction
from chalicelib.db.queries import queries
from chalicelib.domain.endpoints import endpoint_snapshot
from chalicelib.domain.jobs import JobRequest
from chalicelib.domain.payload_specs import validate_input
from chalicelib.domain.statuses import TriggerType
from chalicelib.errors import EndpointNotFound, InvalidCallback, TaskExecutorError
from chalicelib.services.jobs.rows import (
    JobView,
    NewJob,
    create_params,
    created_view,
    execution_row,
    job_row,
)

#: Deepest chain of callbacks: a job's callback is depth 1, the callback's callback 2, ...
MAX_CALLBACK_DEPTH = 3


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


@dataclass(frozen=True)
class CheckedInputs:
    """Items' inputs checked against their endpoints' payload specs before the transaction.

    :func:`check_inputs` reads the endpoints (one statement, its own transaction), then
    validates with no connection held, under one budget for the whole request
    (:func:`~chalicelib.domain.payload_specs.request_budget`). In the transaction an item
    whose endpoint still has the fingerprint read then takes its verdict; an item whose
    endpoint changed in between is validated again there (a race, so rare).
    """

    #: item index -> (the endpoint fingerprint it was checked against, its error or None)
    verdicts: dict[int, tuple[str, TaskExecutorError | None]] = field(default_factory=dict)

    def validate(self, index: int, value: Any, endpoint: Row) -> None:
        """Raise item ``index``'s 422 for input ``value``: from its verdict when that still
        holds (same endpoint fingerprint), else by validating now."""
        verdict = self.verdicts.get(index)
        if verdict is not None and verdict[0] == endpoint.get("fingerprint"):
            if verdict[1] is not None:
                raise verdict[1]
            return
        validate_input(endpoint["payload_schema"], value)

    def check(self, index: int, value: Any, endpoint: Row) -> None:
        """Validate ``value`` for item ``index`` now and keep the verdict."""
        try:
            validate_input(endpoint["payload_schema"], value)
        except TaskExecutorError as exc:
            self.verdicts[index] = (endpoint["fingerprint"], exc)
        else:
            self.verdicts[index] = (endpoint["fingerprint"], None)


def check_inputs(
    db: Database,
    items: Sequence[NewJob | TaskExecutorError],
    known: Callable[[str], Row | None] = lambda name: None,
) -> CheckedInputs:
    """Validate every client item's input before the caller opens its transaction.

    ``known`` gives endpoint rows the process already holds (with their fingerprint), so a
    request naming them reads nothing here; the others are read in one statement. Call it
    inside :func:`~chalicelib.domain.payload_specs.request_budget`.
    """
    todo = {i: x for i, x in enumerate(items) if isinstance(x, NewJob) and not x.system}
    rows: dict[str, Row | None] = {n: known(n) for n in {x.request.endpoint for x in todo.values()}}
    missing = sorted(name for name, row in rows.items() if row is None)
    if missing:
        rows.update({r["name"]: r for r in db.run(queries["jobs_get_endpoints"], names=missing)})
    checked = CheckedInputs()
    for index, item in todo.items():
        endpoint = rows.get(item.request.endpoint)
        if endpoint is not None:  # else a 404, answered in the transaction
            checked.check(index, item.request.input, endpoint)
    return checked


def _check(
    index: int,
    item: NewJob,
    endpoint: Row,
    endpoints: Endpoints,
    now: datetime,
    checked: CheckedInputs,
) -> dict[str, Any]:
    """The item's job row, or the 422 its callbacks or input earn."""
    callbacks = _callbacks(item, endpoint, endpoints)
    if not item.system:
        checked.validate(index, item.request.input, endpoint)
    return job_row(item, endpoint, endpoints.snapshot(endpoint), callbacks, now)


def create_jobs(
    tx: Transaction,
    items: Sequence[NewJob | TaskExecutorError],
    *,
    now: datetime,
    seen: Callable[[list[Row]], None] | None = None,
    checked: CheckedInputs | None = None,
) -> list[Outcome]:
    """Create every valid item in ``tx``; one :class:`Outcome` per item, in order.

    An item given as an error (it failed parsing) is answered with it. Nothing is raised
    for an item: the caller decides whether one error fails the whole request. ``seen`` is
    told of the endpoint rows read. ``checked``: the inputs' verdicts reached before the
    transaction (:func:`check_inputs`); without it, inputs are validated here.
    """
    checked = checked or CheckedInputs()
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
                row = _check(index, item, endpoint, endpoints, now, checked)
                plan.add(index, item.request, row)
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
