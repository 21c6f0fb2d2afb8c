"""Creating jobs: the one path behind ``POST /jobs``, ``POST /jobs/batch``, ``PUT
/jobs/{id}`` (a cron job's new version) and the jobs that callbacks and completed batches
create. Read it top to bottom:

1. **The wake-up** (:func:`wake_for`): whether and how this creation wakes the workers,
   decided once before anything is written. The statement that writes the jobs sends the
   NOTIFY itself (``jobs_create_and_wake``, delivered at COMMIT); after COMMIT a worker in
   this process is nudged (:mod:`chalicelib.wakeup`).
2. **The inputs** (:func:`check_inputs`): every client item's input is validated against
   its endpoint's payload spec before any transaction opens, under one time budget for
   the whole request.
3. **The write**, one of two strategies:

   * one statement, no transaction block (:mod:`~chalicelib.services.jobs.fastpath`):
     ``POST /jobs`` for an endpoint this service has already read, a free key, nothing
     to resolve (:func:`create_one` chooses it);
   * one transaction (:func:`create_jobs`), for everything else and every other caller,
     inside its transaction: read the endpoints, answer each item (:class:`Outcome`), and
     write every job and one-shot execution with one ``jobs_create``.

The answers are ``POST /jobs``'s, item by item: the endpoint exists (404), a known
``(endpoint, idempotency_key)`` returns the existing job whatever the body (200), then
callbacks (422) and the input against the payload spec (422). Keys are looked up only where
the answer depends on it: for items refused with a 422, and for items the insert skipped
because their key was taken. Whatever the number of items, the transaction sends a fixed
number of statements. The rows are typed in :mod:`~chalicelib.services.jobs.rows`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from chalicelib import wakeup
from chalicelib.db import notify
from chalicelib.db.connection import Database, Row, Transaction
from chalicelib.db.queries import Query, queries
from chalicelib.domain.jobs import JobRequest
from chalicelib.domain.payload_specs import request_budget, validate_input
from chalicelib.domain.statuses import TriggerType
from chalicelib.domain.url_prefixes import check_job_url
from chalicelib.errors import EndpointNotFound, InvalidCallback, TaskExecutorError
from chalicelib.services import keys
from chalicelib.services.jobs import fastpath
from chalicelib.services.jobs.rows import (
    EndpointRow,
    ExecutionRow,
    JobRow,
    JobView,
    NewJob,
    create_params,
    created_view,
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

    @property
    def queued(self) -> bool:
        """This item created a job whose execution is due now (an IMMEDIATE job)."""
        view = self.view
        return self.created and view is not None and view.job.trigger_type is TriggerType.IMMEDIATE


# -- 1. the wake-up -----------------------------------------------------------------------


@dataclass(frozen=True)
class Wake:
    """How one creation wakes the workers (decided by :func:`wake_for`). An accelerator
    only: the workers' poll is what correctness relies on."""

    #: The writing statement sends NOTIFY when it queued an execution (delivered at
    #: COMMIT, never for a rolled-back transaction): LISTENing workers in any process.
    notify: bool = False
    #: After COMMIT, nudge a worker running in this process (the local stack; a no-op in
    #: AWS, where none registers).
    local: bool = False

    @property
    def statement(self) -> Query:
        """The statement that writes the jobs: ``jobs_create``, with the NOTIFY or not."""
        return queries["jobs_create_and_wake" if self.notify else "jobs_create"]

    def after_commit(self, outcomes: Iterable[Outcome]) -> None:
        if self.local and any(o.queued for o in outcomes):
            wakeup.notify()


#: A creation inside a transaction someone else commits (callbacks, a batch's on_complete):
#: its workers' loop or poll picks the jobs up.
NO_WAKE = Wake()


def wake_for(db: Database, mode: str, requests: Iterable[JobRequest]) -> Wake:
    """Whether and how creating ``requests`` wakes the workers: only an IMMEDIATE job
    queues an execution now; NOTIFY where ``mode`` (``TE_WAKEUP_NOTIFY``) enables it for
    ``db`` (:func:`chalicelib.db.notify.enabled`: never on CockroachDB)."""
    if not any(r.trigger is TriggerType.IMMEDIATE for r in requests):
        return NO_WAKE
    return Wake(notify=notify.enabled(db, mode), local=True)


# -- POST /jobs: one statement, or one transaction ----------------------------------------


def create_one(
    db: Database, item: NewJob, *, now: datetime, known: fastpath.KnownEndpoints, wake: Wake
) -> Outcome:
    """``POST /jobs``: in one statement when the fast path can answer exactly as the
    transaction would, else in one transaction; ``known`` is the endpoints this service
    has read (the transaction adds the ones it reads)."""
    with request_budget():  # spent before any transaction
        checked = check_inputs(db, [item], known=known)
    endpoint = known.get(item.request.endpoint)
    if endpoint is not None and checked.passed(0) and fastpath.eligible(item, endpoint):
        view = fastpath.create(db, item, endpoint, now=now, statement=wake.statement)
        if view is not None:
            wake.after_commit([Outcome(view=view, created=True)])
            return Outcome(view=view, created=True)
        known.forget(endpoint.name)  # changed, deleted or its key taken: read it again

    def work(tx: Transaction) -> tuple[Outcome, list[EndpointRow]]:
        endpoints = Endpoints(tx)
        [outcome] = create_jobs(
            tx, [item], now=now, checked=checked, wake=wake, endpoints=endpoints
        )
        return outcome, endpoints.read()

    outcome, read = db.transaction(work, name="job_create")
    known.remember(read)
    wake.after_commit([outcome])
    return outcome


# -- 2. the inputs, before the transaction ------------------------------------------------


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

    def validate(self, index: int, value: Any, endpoint: EndpointRow) -> None:
        """Raise item ``index``'s 422 for input ``value``: from its verdict when that still
        holds (same endpoint fingerprint), else by validating now."""
        verdict = self.verdicts.get(index)
        if verdict is not None and verdict[0] == endpoint.fingerprint:
            if verdict[1] is not None:
                raise verdict[1]
            return
        validate_input(endpoint.payload_schema, value)

    def check(self, index: int, value: Any, endpoint: EndpointRow) -> None:
        """Validate ``value`` for item ``index`` now and keep the verdict."""
        try:
            validate_input(endpoint.payload_schema, value)
        except TaskExecutorError as exc:
            self.verdicts[index] = (endpoint.fingerprint, exc)
        else:
            self.verdicts[index] = (endpoint.fingerprint, None)

    def passed(self, index: int) -> bool:
        """Item ``index`` was checked and its input is valid."""
        verdict = self.verdicts.get(index)
        return verdict is not None and verdict[1] is None


def read_endpoints(run: Any, names: Iterable[str]) -> dict[str, EndpointRow]:
    """The live endpoints among ``names``, by name, in one statement (``run`` is
    :meth:`Database.run` or :meth:`Transaction.run`)."""
    rows = run(queries["jobs_get_endpoints"], names=sorted(set(names)))
    return {row["name"]: EndpointRow.from_row(row) for row in rows}


def check_inputs(
    db: Database,
    items: Sequence[NewJob | TaskExecutorError],
    known: fastpath.KnownEndpoints | None = None,
) -> CheckedInputs:
    """Validate every client item's input before the caller opens its transaction.

    Endpoints in ``known`` are not read again here; the others are read in one statement.
    Call it inside :func:`~chalicelib.domain.payload_specs.request_budget`.
    """
    todo = {i: x for i, x in enumerate(items) if isinstance(x, NewJob) and not x.system}
    names = {x.request.endpoint for x in todo.values()}
    rows = {n: known.get(n) if known is not None else None for n in names}
    missing = [name for name, row in rows.items() if row is None]
    if missing:
        rows.update(read_endpoints(db.run, missing))
    checked = CheckedInputs()
    for index, item in todo.items():
        endpoint = rows.get(item.request.endpoint)
        if endpoint is not None:  # else a 404, answered in the transaction
            checked.check(index, item.request.input, endpoint)
    return checked


# -- 3. the write, in one transaction -----------------------------------------------------


def create_jobs(
    tx: Transaction,
    items: Sequence[NewJob | TaskExecutorError],
    *,
    now: datetime,
    checked: CheckedInputs | None = None,
    wake: Wake = NO_WAKE,
    endpoints: Endpoints | None = None,
) -> list[Outcome]:
    """Create every valid item in ``tx``; one :class:`Outcome` per item, in order.

    An item given as an error (it failed parsing) is answered with it. Nothing is raised
    for an item: the caller decides whether one error fails the whole request.
    ``checked``: the inputs' verdicts reached before the transaction (:func:`check_inputs`);
    without it, inputs are validated here. ``wake``: from :func:`wake_for` (the caller
    runs its :meth:`Wake.after_commit`). ``endpoints``: the endpoints of ``tx``, when the
    caller wants to know which were read.
    """
    checked = checked or CheckedInputs()
    outcomes: list[Outcome | None] = [
        Outcome(error=item) if isinstance(item, TaskExecutorError) else None for item in items
    ]
    todo = {i: item for i, item in enumerate(items) if isinstance(item, NewJob)}
    endpoints = Endpoints(tx) if endpoints is None else endpoints
    endpoints.load(item.request.endpoint for item in todo.values())
    plan, refused = _plan_rows(todo, endpoints, outcomes, now=now, checked=checked)
    _answer_refused(tx, todo, refused, outcomes)
    _insert(tx, plan, outcomes, wake)
    for index, first in plan.twins.items():
        outcomes[index] = Outcome(view=outcomes[first].view, created=False)  # type: ignore[union-attr]
    assert all(o is not None for o in outcomes)
    return [o for o in outcomes if o is not None]


def _plan_rows(
    todo: Mapping[int, NewJob],
    endpoints: Endpoints,
    outcomes: list[Outcome | None],
    *,
    now: datetime,
    checked: CheckedInputs,
) -> tuple[_Plan, dict[int, TaskExecutorError]]:
    """The rows to insert for ``todo``, a twin (the same request twice) once; an item whose
    endpoint is missing answered in ``outcomes`` (404), one refused kept apart (422s, unless
    their key is known: 200)."""
    plan = _Plan()
    refused: dict[int, TaskExecutorError] = {}
    for index, item in todo.items():
        endpoint = endpoints.get(item.request.endpoint)
        if endpoint is None:
            error = EndpointNotFound(f"Endpoint '{item.request.endpoint}' does not exist.")
            outcomes[index] = Outcome(error=error)
        elif not plan.twin(index, item.request):
            try:
                plan.add(index, _job_row(index, item, endpoint, endpoints, now, checked))
            except TaskExecutorError as exc:
                refused[index] = exc
    return plan, refused


class Endpoints:
    """The endpoints one transaction has read, by name (a missing one maps to None)."""

    def __init__(self, tx: Transaction) -> None:
        self._tx = tx
        self._rows: dict[str, EndpointRow | None] = {}

    def load(self, names: Iterable[str | None]) -> None:
        missing = {n for n in names if n is not None and n not in self._rows}
        if missing:
            self._rows.update(dict.fromkeys(missing))
            self._rows.update(read_endpoints(self._tx.run, missing))

    def get(self, name: str) -> EndpointRow | None:
        self.load([name])
        return self._rows[name]

    def read(self) -> list[EndpointRow]:
        """Every live endpoint read so far."""
        return [row for row in self._rows.values() if row is not None]

    def chain_depth(self, names: Iterable[str], limit: int) -> int:
        """How many levels of callbacks follow from ``names`` through the endpoints'
        defaults, counted up to ``limit + 1`` (a cycle is endless, so over any limit)."""
        level, depth = {n for n in names if n}, 0
        while level and depth <= limit:
            depth += 1
            self.load(level)
            rows = [self._rows[n] for n in level]
            level = {n for r in rows if r is not None for n in (r.on_success, r.on_failure) if n}
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


def _callbacks(
    item: NewJob, endpoint: EndpointRow, endpoints: Endpoints
) -> tuple[str | None, str | None]:
    """The job's callbacks: a new version keeps its predecessor's; else its own, else its
    endpoint's defaults. A callback job at the deepest level gets none; one created by the
    service drops defaults it cannot honour."""
    if item.replaces is not None:
        return (item.replaces.on_success, item.replaces.on_failure)
    names = (
        item.request.on_success or endpoint.on_success,
        item.request.on_failure or endpoint.on_failure,
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


def _job_row(
    index: int,
    item: NewJob,
    endpoint: EndpointRow,
    endpoints: Endpoints,
    now: datetime,
    checked: CheckedInputs,
) -> JobRow:
    """The item's job row, or the 422 its callbacks, its own URL or its input earn."""
    callbacks = _callbacks(item, endpoint, endpoints)
    url = (item.request.delivery_overrides or {}).get("url")
    if url is not None:
        check_job_url(url, endpoint.spec)
    if not item.system:
        checked.validate(index, item.request.input, endpoint)
    return JobRow.build(item, endpoint, callbacks, now)


def _key(request: JobRequest) -> tuple[str, str] | None:
    if request.idempotency_key is None:
        return None
    return (request.endpoint, request.idempotency_key)


class _Plan:
    """The rows one call writes, and which item each belongs to."""

    def __init__(self) -> None:
        self.rows: dict[int, JobRow] = {}  #: item index -> job row
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

    def add(self, index: int, row: JobRow) -> None:
        if row.key is not None:
            self._first[row.key] = index
        self.rows[index] = row


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


def _insert(tx: Transaction, plan: _Plan, outcomes: list[Outcome | None], wake: Wake) -> None:
    """One statement writes the jobs and their executions (and sends the wake-up); a twin
    committed meanwhile is a 200."""
    if not plan.rows:
        return
    jobs = list(plan.rows.values())
    executions = {job.job_id: ExecutionRow.of(job, seq) for seq, job in enumerate(jobs)}
    planned = [e for e in executions.values() if e is not None]
    [written] = tx.run(wake.statement, **create_params(jobs, planned))
    inserted = set(written["job_ids"])
    written_rows = [e for e in planned if e.job_id in inserted]
    keys.created(tx, _keys_of(written_rows), concurrency=_gated_keys_of(written_rows))
    twins = find_existing(tx, (row.key for row in jobs if row.job_id not in inserted))
    for index, row in plan.rows.items():
        if row.job_id in inserted:
            view = created_view(row, executions[row.job_id], written["now"])
            outcomes[index] = Outcome(view=view, created=True)
        else:
            outcomes[index] = Outcome(view=twins[row.key], created=False)


def _keys_of(executions: Iterable[ExecutionRow]) -> list[tuple[str, str]]:
    """The (endpoint, ordering key) pairs of the keyed ones among ``executions``."""
    return [(e.endpoint, e.ordering_key) for e in executions if e.ordering_key is not None]


def _gated_keys_of(executions: Iterable[ExecutionRow]) -> list[tuple[str, str]]:
    """The (endpoint, concurrency key) pairs of the gated ones among ``executions``."""
    return [(e.endpoint, e.concurrency_key) for e in executions if e.concurrency_key is not None]


# -- reads the answers need ---------------------------------------------------------------


def find_existing(
    tx: Transaction, keys: Iterable[tuple[str, str] | None]
) -> dict[tuple[str, str] | None, JobView]:
    """Jobs already holding these (endpoint, idempotency_key) pairs, by pair."""
    pairs = sorted({k for k in keys if k is not None})
    if not pairs:
        return {}
    payload = json.dumps([{"endpoint": e, "key": k} for e, k in pairs])
    rows = tx.run(queries["jobs_find_by_idempotency_keys"], pairs=payload)
    return {_job_key(v): v for v in views_of(tx, rows)}


def _job_key(view: JobView) -> tuple[str, str] | None:
    key = view.job.idempotency_key
    return None if key is None else (view.job.endpoint, key)


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
