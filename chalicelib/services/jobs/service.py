"""Job use cases: create (IMMEDIATE / DELAYED / CRON, on an endpoint or fanned out to a
topic's endpoints), read, list (or find by key), update (a
cron job's new version), reschedule (a DELAYED job's new time), cancel, versions, trigger
(run a cron job now), pause, resume.

Each use case is one transaction through :meth:`Database.transaction` (re-runnable: it only
reads and writes the database and computes from what it read). Creating a job, here for
``POST /jobs`` and ``PUT /jobs/{id}``, goes through :mod:`chalicelib.services.jobs.create`;
a job's status and executions are in :mod:`chalicelib.services.jobs.status`.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from chalicelib import wakeup
from chalicelib.db import notify
from chalicelib.db.connection import Database, Row, Transaction
from chalicelib.db.queries import Query, queries
from chalicelib.db.shapes import shaped
from chalicelib.domain.jobs import (
    CronSchedule,
    JobRequest,
    parse_cron_update,
    parse_job_request,
    parse_reschedule,
)
from chalicelib.domain.pagination import PageRequest
from chalicelib.domain.payload_specs import request_budget
from chalicelib.domain.statuses import ExecutionStatus, JobStatus, TriggerType
from chalicelib.domain.timefmt import iso
from chalicelib.domain.topics import parse_topic_job
from chalicelib.domain.trace_context import TraceContext
from chalicelib.errors import (
    InvalidTransition,
    JobNotFound,
    JobNotPausable,
    JobNotTriggerable,
    JobNotUpdatable,
)
from chalicelib.services import keys
from chalicelib.services.executions import cancel_in, is_final, read_committed
from chalicelib.services.jobs.create import (
    CheckedInputs,
    create_jobs,
    create_one,
    find_existing,
    read_endpoints,
    wake_for,
)
from chalicelib.services.jobs.fanout import FanOut, create_fan_out
from chalicelib.services.jobs.fastpath import KnownEndpoints
from chalicelib.services.jobs.rows import JobView, NewJob, Replaces, new_id
from chalicelib.services.longpoll import Poller
from chalicelib.services.views import Job


@dataclass(frozen=True)
class CreateResult:
    view: JobView
    created: bool  #: False when the idempotency key matched an existing job (200)


def get_job_in(tx: Transaction, job_id: str) -> Row:
    """The job row or 404 JOB_NOT_FOUND."""
    job = tx.one(queries["jobs_get"], job_id=job_id)
    if job is None:
        raise JobNotFound(f"Job with ID '{job_id}' does not exist.")
    return job


def _view_in(tx: Transaction, job: Row) -> JobView:
    return JobView.from_rows(job, tx.one(queries["jobs_latest_execution"], job_id=job["job_id"]))


def _job_outside(db: Database, job_id: str) -> Row | None:
    """The job, read outside any transaction (one statement)."""
    return next(iter(db.run(queries["jobs_get"], job_id=job_id)), None)


def _active_cron_job(db: Database, job_id: str) -> Row | None:
    """The job if it is an ACTIVE cron job, read outside any transaction (one statement)."""
    job = _job_outside(db, job_id)
    if job is None or job["trigger_type"] != TriggerType.CRON or job["status"] != "ACTIVE":
        return None
    return job


def _delivery_context(
    db: Database, job_id: str
) -> tuple[dict[str, str] | None, TraceContext | None]:
    """The job's own headers and trace context, which its new version keeps."""
    row = next(iter(db.run(queries["jobs_delivery_context"], job_id=job_id)), None)
    if row is None or row["traceparent"] is None:
        return (None if row is None else row["headers"]), None
    return row["headers"], TraceContext(row["traceparent"], row["tracestate"])


@dataclass(frozen=True)
class _PreparedUpdate:
    """A PUT /jobs/{id} computed before its transaction: the new version's request (None
    when the job is not an ACTIVE cron job: the transaction answers 404 or 409) and its
    input's verdict."""

    request: JobRequest | None = None
    checked: CheckedInputs = field(default_factory=CheckedInputs)


def _schedule_of(job: Row) -> CronSchedule:
    return CronSchedule(
        expression=job["cron_expression"],
        timezone=job["cron_timezone"],
        starts_at=job["cron_starts_at"],
        ends_at=job["cron_ends_at"],
    )


@dataclass(frozen=True)
class JobService:
    """Creates and manages jobs. ``clock`` is UTC-aware "now" (injected for tests);
    ``wakeup_notify`` is ``TE_WAKEUP_NOTIFY`` (:func:`chalicelib.db.notify.enabled`)."""

    db: Database
    clock: Callable[[], datetime]
    poller: Poller = field(default_factory=Poller)
    wakeup_notify: str = notify.AUTO
    #: The endpoints this service has read, for POST /jobs's one-statement path: one per
    #: service, which lives as long as its API root (chalicelib.wiring.api.ApiRoot).
    known: KnownEndpoints = field(default_factory=KnownEndpoints, compare=False)

    # -- create ----------------------------------------------------------------------------

    def create(self, body: Mapping[str, Any], *, trace: TraceContext | None = None) -> CreateResult:
        """POST /jobs: 201 for a new job, 200 for an idempotency-key hit; usually one
        statement, else one transaction (:func:`chalicelib.services.jobs.create.create_one`).
        ``trace``: the request's trace context (the job's own headers may carry another)."""
        now = self.clock()
        request = parse_job_request(body, now=now, trace=trace)
        wake = wake_for(self.db, self.wakeup_notify, [request])
        outcome = create_one(self.db, NewJob(request), now=now, known=self.known, wake=wake)
        return CreateResult(outcome.raise_error(), created=outcome.created)

    def fan_out(self, body: Mapping[str, Any], *, trace: TraceContext | None = None) -> FanOut:
        """POST /jobs with ``topic``: one job per endpoint of the topic, in one transaction
        (:mod:`chalicelib.services.jobs.fanout`); 201, or 200 for a known key."""
        now = self.clock()
        topic, request = parse_topic_job(body, now=now, trace=trace)
        wake = wake_for(self.db, self.wakeup_notify, [request])
        return create_fan_out(self.db, topic, request, now=now, known=self.known, wake=wake)

    # -- read ------------------------------------------------------------------------------

    def get(self, job_id: str, *, wait: int | None = None) -> JobView:
        """A job with its latest execution; with ``wait``, long-poll until it is final."""

        def fetch() -> JobView:
            return self.db.transaction(
                lambda tx: _view_in(tx, get_job_in(tx, job_id)), name="job_get"
            )

        if not wait:
            return fetch()
        return self.poller.wait(fetch, _nothing_to_wait_for, wait)

    def list_page(self, filters: Mapping[str, str | None], page: PageRequest) -> list[JobView]:
        """A keyset page of jobs, newest first; one-shot jobs carry their execution. With an
        ``idempotency_key`` (and its endpoint), the job holding it: one item or none."""
        key = filters.get("idempotency_key")
        if key is not None:
            return self._by_key(filters, key, page)

        def work(tx: Transaction) -> list[JobView]:
            query, params = list_query(filters, page)
            jobs = tx.run(query, **params)
            one_shot = [j["job_id"] for j in jobs if j["trigger_type"] != TriggerType.CRON]
            executions: dict[str, Row] = {}
            if one_shot:
                for row in tx.run(queries["jobs_executions_of"], job_ids=one_shot):
                    executions[row["job_id"]] = row
            return [JobView.from_rows(job, executions.get(job["job_id"])) for job in jobs]

        return self.db.transaction(work, name="job_list")

    def _by_key(
        self, filters: Mapping[str, str | None], key: str, page: PageRequest
    ) -> list[JobView]:
        """``GET /jobs?endpoint=&idempotency_key=``: one probe of idx_jobs_idempotency (the
        lookup a repeated POST /jobs makes); the other filters and the cursor are checked
        on the one job found."""
        endpoint = filters["endpoint"]
        assert endpoint is not None, "parse_job_filters requires it with a key"
        found = self.db.transaction(
            lambda tx: find_existing(tx, [(endpoint, key)]), name="job_by_key"
        )
        return [view for view in found.values() if _listed(view.job, filters, page)]

    def versions(self, job_id: str, page: PageRequest) -> list[Job]:
        """The whole version chain containing ``job_id``, oldest first."""

        def work(tx: Transaction) -> list[Job]:
            root = tx.scalar(queries["jobs_version_root"], job_id=job_id)
            if root is None:
                raise JobNotFound(f"Job with ID '{job_id}' does not exist.")
            rows = tx.run(
                queries["jobs_version_chain"],
                root_id=root,
                after_id=page.after_id,
                limit_plus_one=page.limit + 1,
            )
            return [Job.from_row(row) for row in rows]

        return self.db.transaction(work, name="job_versions")

    # -- update / cancel -------------------------------------------------------------------

    def update(self, job_id: str, body: Mapping[str, Any]) -> JobView:
        """PUT /jobs/{id}: a DELAYED job is rescheduled (:meth:`reschedule`); a CRON job
        gets a new version, the old one RETIRED, atomically (CAS).

        The body is parsed, the new schedule's first run computed and the new input
        validated before the transaction (as every creation's are), from the job read just
        before: a job's schedule and input never change in place, so what was computed
        holds in the transaction; only the input's verdict is redone there if the endpoint
        changed meanwhile."""
        now = self.clock()
        job = _job_outside(self.db, job_id)
        if job is not None and job["trigger_type"] == TriggerType.DELAYED:
            return self.reschedule(job_id, body)
        with request_budget():
            prepared = self._prepare_update(job, body, now)
        return self.db.transaction(
            lambda tx: self._update_in(tx, job_id, prepared, now), name="job_put"
        )

    def reschedule(self, job_id: str, body: Mapping[str, Any]) -> JobView:
        """PUT /jobs/{id} of a DELAYED job: ``{"run_at"}`` or ``{"delay"}`` (from now) moves
        its execution while it is PENDING or QUEUED, in one transaction; 409
        INVALID_TRANSITION once it has started or ended. The job keeps its id and takes the
        next version; the version it replaces is kept (``GET /jobs/{id}/versions``)."""
        run_at = parse_reschedule(body, now=self.clock())
        return self.db.transaction(
            lambda tx: _reschedule_in(tx, job_id, run_at), name="job_reschedule"
        )

    def _prepare_update(
        self, job: Row | None, body: Mapping[str, Any], now: datetime
    ) -> _PreparedUpdate:
        if job is None or job["trigger_type"] != TriggerType.CRON or job["status"] != "ACTIVE":
            return _PreparedUpdate()  # answered in the transaction (404, 409)
        change = parse_cron_update(body, current=_schedule_of(job), current_input=job["input"])
        headers, trace = _delivery_context(self.db, job["job_id"])
        request = JobRequest(
            endpoint=job["endpoint"],
            trigger=TriggerType.CRON,
            idempotency_key=None,
            input=change.input,
            schedule=change.schedule,
            first_run_at=change.schedule.first_run(now),
            headers=headers,
            trace=trace,
            ordering_key=job["ordering_key"],  # a new version keeps its key
        )
        checked = CheckedInputs()
        for endpoint in read_endpoints(self.db.run, [job["endpoint"]]).values():
            checked.check(0, change.input, endpoint)
        return _PreparedUpdate(request, checked)

    def _update_in(
        self, tx: Transaction, job_id: str, prepared: _PreparedUpdate, now: datetime
    ) -> JobView:
        job = get_job_in(tx, job_id)
        _require_updatable(job)
        if prepared.request is None:  # not an ACTIVE cron job a moment ago: RETIRED is final
            raise JobNotUpdatable(f"Job '{job_id}' changed while it was being updated.")
        # The new version is a new job, created as every job is: it snapshots the endpoint
        # as it is now (404 if it is gone) and its input is checked against the endpoint's
        # current payload spec (422). It keeps the callbacks of the version it replaces.
        replaces = Replaces(job_id, job["version"], job["on_success"], job["on_failure"])
        item = NewJob(prepared.request, replaces=replaces)
        [outcome] = create_jobs(tx, [item], now=now, checked=prepared.checked)
        new_job = outcome.raise_error()
        retired = tx.one(queries["jobs_retire"], job_id=job_id, replaced_by_id=new_job.job_id)
        if retired:
            keys.changed(tx, retired["keyed"])  # its cancelled ticks leave their key
            return new_job
        raise JobNotUpdatable(f"Job '{job_id}' was retired while it was being updated.")

    def cancel(self, job_id: str) -> JobView:
        """CRON: retire (no further ticks). One-shot: cancel its execution (which retires it).

        Idempotent: a job already RETIRED, or whose execution is already CANCELLED, is
        answered with its current state. 409 EXECUTION_NOT_CANCELLABLE only where the
        specification says: a one-shot whose execution is RUNNING, SUCCESS or FAILED.
        """
        return self.db.transaction(lambda tx: self._cancel_in(tx, job_id), name="job_cancel")

    def trigger(self, job_id: str) -> str:
        """Run now: one extra execution of an ACTIVE cron job, due now, without moving its
        schedule; returns its id. 409 JOB_NOT_TRIGGERABLE for a one-shot or RETIRED job."""
        execution_id = self.db.transaction(
            lambda tx: _trigger_in(tx, job_id, self.db, self.wakeup_notify), name="job_trigger"
        )
        wakeup.notify()  # after COMMIT, as POST /jobs does
        return execution_id

    def pause(self, job_id: str) -> JobView:
        """Stop an ACTIVE cron job's ticks until resumed (idempotent); 409 JOB_NOT_PAUSABLE
        for a one-shot or RETIRED job."""

        def work(tx: Transaction) -> JobView:
            job = get_job_in(tx, job_id)
            _require_pausable(job)
            paused = tx.one(queries["jobs_pause"], job_id=job_id)
            if paused:
                keys.changed(tx, paused["keyed"])  # its cancelled ticks leave their key
            return _view_in(tx, get_job_in(tx, job_id))

        return self.db.transaction(work, name="job_pause")

    def resume(self, job_id: str, *, catch_up: bool = False) -> JobView:
        """Let a paused cron job tick again (idempotent). The ticks missed while paused are
        skipped (the next tick is the first one after now) unless ``catch_up``: then the
        materializer catches them up one by one from where the pause stopped it."""

        following = None if catch_up else self._next_run_if_resumed(job_id)

        def work(tx: Transaction) -> JobView:
            job = get_job_in(tx, job_id)
            _require_pausable(job)
            tx.one(queries["jobs_resume"], job_id=job_id, next_run_at=following)
            return _view_in(tx, get_job_in(tx, job_id))

        return self.db.transaction(work, name="job_resume")

    def _next_run_if_resumed(self, job_id: str) -> datetime | None:
        """The first tick after now of an ACTIVE cron job, computed before the transaction
        (its schedule never changes in place); None for any other job, which the
        transaction refuses."""
        job = _active_cron_job(self.db, job_id)
        return None if job is None else _schedule_of(job).first_run(self.clock())

    def _cancel_in(self, tx: Transaction, job_id: str) -> JobView:
        read_committed(tx)
        job = get_job_in(tx, job_id)
        if job["trigger_type"] != TriggerType.CRON:
            execution_id = tx.scalar(queries["executions_one_shot_of_job"], job_id=job_id)
            if execution_id is not None:  # none: an earlier version of a rescheduled job
                cancel_in(tx, execution_id)
        elif job["status"] == JobStatus.ACTIVE:
            retired = tx.one(queries["jobs_retire"], job_id=job_id, replaced_by_id=None)
            if retired:
                keys.changed(tx, retired["keyed"])  # its cancelled ticks leave their key
        return _view_in(tx, get_job_in(tx, job_id))


def _reschedule_in(tx: Transaction, job_id: str, run_at: datetime) -> JobView:
    """Move a DELAYED job's waiting execution to ``run_at`` (jobs.sql: jobs_reschedule)."""
    job = get_job_in(tx, job_id)
    version_id = new_id("job_")
    tx.one(queries["jobs_reschedule_keep_version"], job_id=job_id, version_id=version_id)
    message = (
        f"Rescheduled: run_at moved from {iso(job['run_at'])} to {iso(run_at)} "
        f"(job version {job['version'] + 1})."
    )
    moved = tx.one(
        queries["jobs_reschedule"],
        job_id=job_id,
        version_id=version_id,
        run_at=run_at,
        message=message,
    )
    if moved is None:
        _refuse_reschedule(tx, job)
    else:  # a keyed execution's new time is its new place in its key
        keys.created_rows(tx, [moved])
    return _view_in(tx, get_job_in(tx, job_id))


def _refuse_reschedule(tx: Transaction, job: Row) -> None:
    """Why a DELAYED job's execution did not move: an earlier version of a rescheduled job
    has none (409 JOB_NOT_UPDATABLE, as a retired cron version); otherwise it has started
    or ended (409 INVALID_TRANSITION)."""
    execution = tx.one(queries["jobs_latest_execution"], job_id=job["job_id"])
    if execution is None:
        raise JobNotUpdatable(_retired_message(job) + " Reschedule the current version instead.")
    raise InvalidTransition(
        f"Job '{job['job_id']}' cannot be rescheduled: its execution "
        f"'{execution['execution_id']}' is {execution['status']}; only a PENDING or QUEUED "
        "execution (not started yet) can be moved."
    )


def _trigger_in(tx: Transaction, job_id: str, db: Database, wakeup_notify: str) -> str:
    job = get_job_in(tx, job_id)
    # Its own key, never a tick's ("trigger:" + 128 random bits): each trigger is one more.
    key = f"trigger:{secrets.token_hex(16)}"
    created = tx.one(queries["jobs_trigger_execution"], job_id=job_id, idempotency_key=key)
    execution_id = None if created is None else created["execution_id"]
    if created is not None:  # a keyed one waits for its key's turn
        keys.created_rows(tx, [created])
    if execution_id is None:
        if job["trigger_type"] != TriggerType.CRON:
            raise JobNotTriggerable(
                f"Job '{job_id}' is a {job['trigger_type']} job: only CRON jobs can be "
                "triggered (its one execution is already scheduled)."
            )
        raise JobNotTriggerable(_retired_message(job) + " Trigger the current version instead.")
    notify.publish(tx, db, wakeup_notify)  # delivered at COMMIT: wakes LISTENing workers
    return str(execution_id)


def list_query(
    filters: Mapping[str, str | None], page: PageRequest
) -> tuple[Query, dict[str, Any]]:
    """The statement of ``GET /jobs`` for these filters, cut to their shape (jobs.sql).

    ``jobs_list`` for no status or RETIRED; for ACTIVE ``jobs_list_active``, drawn from
    live work, with the arms that can hold the trigger asked for (cron, one-shot, or both).
    """
    params: dict[str, Any] = {**filters, **page.params()}
    status = params.pop("status", None)
    if status != JobStatus.ACTIVE:
        params["retired"] = True if status == JobStatus.RETIRED else None
        if params.get("trigger_type") == TriggerType.CRON:
            params["trigger_type"], params["cron"] = None, True
        return shaped(queries["jobs_list"], params)
    trigger = params.get("trigger_type")
    one_shot = trigger != TriggerType.CRON
    params["cron"] = trigger in (None, TriggerType.CRON)
    params["one_shot"] = one_shot
    params["waiting"] = [s.value for s in _waiting(trigger)] if one_shot else []
    if not one_shot:
        params["trigger_type"] = None  # the cron arm is all cron
    return shaped(queries["jobs_list_active"], params)


def _waiting(trigger: str | None) -> tuple[ExecutionStatus, ...]:
    """The statuses a one-shot job waits in: never PENDING for an IMMEDIATE job."""
    waiting = (ExecutionStatus.PENDING, ExecutionStatus.QUEUED, ExecutionStatus.RETRYING)
    return waiting[1:] if trigger == TriggerType.IMMEDIATE else waiting


def _listed(job: Job, filters: Mapping[str, str | None], page: PageRequest) -> bool:
    """Whether ``job`` passes GET /jobs's trigger and status filters and lies past the
    page's cursor (newest first)."""
    trigger, status = filters.get("trigger_type"), filters.get("status")
    if trigger is not None and job.trigger_type != trigger:
        return False
    if status is not None and job.status != status:
        return False
    if page.after_ts is None or page.after_id is None:
        return True
    return (job.created_at, job.job_id) < (page.after_ts, page.after_id)


def _retired_message(job: Row) -> str:
    replaced = job.get("replaced_by_id")
    suffix = f" (replaced by version '{replaced}')" if replaced else ""
    return f"Job '{job['job_id']}' is already RETIRED{suffix}."


def _require_pausable(job: Row) -> None:
    if job["trigger_type"] != TriggerType.CRON:
        raise JobNotPausable(
            f"Job '{job['job_id']}' is a {job['trigger_type']} job: only CRON jobs can be "
            "paused (cancel a one-shot job instead)."
        )
    if job["status"] != JobStatus.ACTIVE:
        raise JobNotPausable(_retired_message(job) + " Pause the current version instead.")


def _require_updatable(job: Row) -> None:
    if job["trigger_type"] != TriggerType.CRON:
        raise JobNotUpdatable(
            f"Job '{job['job_id']}' is a {job['trigger_type']} job: only CRON jobs can be "
            "updated and DELAYED jobs rescheduled."
        )
    if job["status"] != JobStatus.ACTIVE:
        raise JobNotUpdatable(_retired_message(job) + " Update the current version instead.")


def _nothing_to_wait_for(view: JobView) -> bool:
    """Long-poll end condition for a job: its latest execution is final.

    A job without an execution is final unless it is an ACTIVE cron job (a tick may still
    create one).
    """
    if view.execution is not None:
        return is_final(view.execution)
    job = view.job
    return not (job.trigger_type == TriggerType.CRON and job.status == JobStatus.ACTIVE)
