"""``POST /jobs`` in one round trip, when nothing needs the full transaction.

The full path (:func:`chalicelib.services.jobs.create.create_jobs`) is one SERIALIZABLE
transaction: BEGIN, read the endpoint, write the job and its execution (and read back a
job already holding the key), wake the workers, COMMIT. Most requests name an endpoint this
process has already read and a key nobody used, so they can be one statement instead:

* The process remembers the endpoint rows the full path read (:class:`KnownEndpoints`),
  each with the fingerprint the database computed over everything a job depends on
  (``endpoint_fingerprint`` in jobs.sql).
* The input is checked in Python against the remembered payload spec, and the job and
  execution rows are built as the full path builds them.
* One statement (``jobs_create_and_wake`` or ``jobs_create``, sent without BEGIN/COMMIT by
  :meth:`Database.statement`, SERIALIZABLE) writes them only if the endpoint is still live
  and hashes to that fingerprint, and only if the key is free (ON CONFLICT DO NOTHING).

When the statement writes nothing (the endpoint changed or was deleted, the key is taken)
or the request needs what only the full path does (an endpoint not yet known, callbacks,
a cron schedule, no idempotency key, an input that fails validation: a known key must win
over the 422), :func:`create_one` answers None and the caller runs the full path,
which reads everything again and remembers what it read. Either way the answer is what
the full path alone would have given. Measured by bench/ (workload 8): see bench/README.md.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from chalicelib.db.connection import Database, Row
from chalicelib.db.queries import queries
from chalicelib.domain.endpoints import endpoint_snapshot
from chalicelib.domain.jobs import JobRequest
from chalicelib.domain.payload_specs import validate_input
from chalicelib.domain.statuses import TriggerType
from chalicelib.errors import TaskExecutorError
from chalicelib.services.jobs.rows import (
    JobView,
    NewJob,
    create_params,
    created_view,
    execution_row,
    job_row,
)

#: Endpoints remembered per process and database (least recently used forgotten first).
MAX_KNOWN_ENDPOINTS = 512


@dataclass(frozen=True)
class KnownEndpoint:
    row: Row  #: as jobs_get_endpoints read it, with its fingerprint
    snapshot: dict[str, Any]  #: endpoint_snapshot(row), built once


class KnownEndpoints:
    """The endpoint rows one process has read, by name. Only a hint: the creating
    statement checks each against the database (its fingerprint) before it writes."""

    def __init__(self, size: int = MAX_KNOWN_ENDPOINTS) -> None:
        self._size = size
        self._rows: OrderedDict[str, KnownEndpoint] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, name: str) -> KnownEndpoint | None:
        with self._lock:
            known = self._rows.get(name)
            if known is not None:
                self._rows.move_to_end(name)
            return known

    def remember(self, rows: list[Row]) -> None:
        fresh = [KnownEndpoint(row, endpoint_snapshot(row)) for row in rows]
        with self._lock:
            for known in fresh:
                self._rows[known.row["name"]] = known
                self._rows.move_to_end(known.row["name"])
            while len(self._rows) > self._size:
                self._rows.popitem(last=False)

    def forget(self, name: str) -> None:
        with self._lock:
            self._rows.pop(name, None)


_known: weakref.WeakKeyDictionary[Database, KnownEndpoints] = weakref.WeakKeyDictionary()
_known_lock = threading.Lock()


def known_endpoints(db: Database) -> KnownEndpoints:
    """The endpoints remembered for ``db`` in this process."""
    with _known_lock:
        known = _known.get(db)
        if known is None:
            known = _known[db] = KnownEndpoints()
        return known


def _eligible(request: JobRequest, known: KnownEndpoint | None) -> bool:
    """Whether the fast path can answer exactly as the full path would."""
    if known is None or request.trigger is TriggerType.CRON:
        return False
    if request.idempotency_key is None:
        return False  # the key is what makes the statement safe to send twice
    if request.on_success or request.on_failure:
        return False  # callbacks: their endpoints and chain depth are read in the transaction
    return not (known.row["on_success"] or known.row["on_failure"])


def create_one(db: Database, request: JobRequest, *, now: datetime, wake: bool) -> JobView | None:
    """The created job's view, or None: run the full path (see the module's docstring).

    ``wake``: send the workers' wake-up with the statement (an IMMEDIATE job, and
    notifications enabled).
    """
    known = known_endpoints(db).get(request.endpoint)
    if not _eligible(request, known):
        return None
    assert known is not None
    try:
        validate_input(known.row["payload_schema"], request.input)
    except TaskExecutorError:
        return None  # a job already holding the key is answered 200 whatever the body
    job = job_row(NewJob(request), known.row, known.snapshot, (None, None), now)
    job["fingerprint"] = known.row["fingerprint"]
    execution = execution_row(job)
    query = queries["jobs_create_and_wake" if wake else "jobs_create"]
    [written] = db.statement(query, **create_params([job], [execution]))
    if written["job_ids"]:
        return created_view(job, execution, written["now"])
    # Nothing written: the endpoint changed, or the key is taken, or (after a lost
    # connection) the first send committed it. Only the last is this request's own job.
    # One read by id on this rare path, rather than one on every statement's.
    mine = db.run(queries["jobs_get"], job_id=job["job_id"])
    if mine:
        return created_view(job, execution, mine[0]["created_at"])
    known_endpoints(db).forget(request.endpoint)
    return None
