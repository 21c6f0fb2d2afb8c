"""``POST /jobs`` in one round trip: the fast strategy of :func:`.create.create_one`.

The full path (:func:`~chalicelib.services.jobs.create.create_jobs`) is one SERIALIZABLE
transaction: BEGIN, read the endpoint, write the job and its execution (and read back a
job already holding the key), COMMIT. Most requests name an endpoint the service has
already read and a key nobody used, so they can be one statement instead:

* The job service remembers the endpoint rows its transactions read
  (:class:`KnownEndpoints`, owned by the service), each with the fingerprint the database
  computed over everything a job depends on (the fingerprint of ``jobs_get_endpoints``).
* The input has been checked against the remembered payload spec
  (:func:`~chalicelib.services.jobs.create.check_inputs`, as for every creation), and the
  job and execution rows are built as the full path builds them.
* One statement (``jobs_create_and_wake`` or ``jobs_create``, as the wake-up decided; sent
  without BEGIN/COMMIT by :meth:`Database.statement`, SERIALIZABLE) writes them only if the
  endpoint is still live and hashes to that fingerprint, and only if the key is free (ON
  CONFLICT DO NOTHING).

Anything else takes the full transaction: an endpoint not yet known, callbacks, a cron
schedule, no idempotency key, an input that fails validation (a known key must win over
the 422), or a statement that wrote nothing (the endpoint changed or was deleted, the key
is taken). Either way the answer is what the full path alone would have given. Measured by
bench/ (workload 8): see bench/README.md.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from datetime import datetime

from chalicelib.db.connection import Database
from chalicelib.db.queries import Query, queries
from chalicelib.domain.statuses import TriggerType
from chalicelib.domain.url_prefixes import url_problem
from chalicelib.services.jobs.rows import (
    EndpointRow,
    ExecutionRow,
    JobRow,
    JobView,
    NewJob,
    create_params,
    created_view,
)

#: Endpoints a job service remembers (least recently used forgotten first).
MAX_KNOWN_ENDPOINTS = 512


class KnownEndpoints:
    """The endpoint rows a job service has read, by name. Only a hint: the creating
    statement checks each against the database (its fingerprint) before it writes."""

    def __init__(self, size: int = MAX_KNOWN_ENDPOINTS) -> None:
        self._size = size
        self._rows: OrderedDict[str, EndpointRow] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, name: str) -> EndpointRow | None:
        with self._lock:
            known = self._rows.get(name)
            if known is not None:
                self._rows.move_to_end(name)
            return known

    def remember(self, rows: Iterable[EndpointRow]) -> None:
        with self._lock:
            for row in rows:
                self._rows[row.name] = row
                self._rows.move_to_end(row.name)
            while len(self._rows) > self._size:
                self._rows.popitem(last=False)

    def forget(self, name: str) -> None:
        with self._lock:
            self._rows.pop(name, None)


def eligible(item: NewJob, endpoint: EndpointRow) -> bool:
    """Whether one statement can answer ``item`` exactly as the full path would."""
    request = item.request
    if request.trigger is TriggerType.CRON:
        return False
    if request.idempotency_key is None:
        return False  # the key is what makes the statement safe to send twice
    if request.ordering_key is not None:
        return False  # its key is settled in the transaction (chalicelib.services.keys)
    if request.concurrency_key is not None:
        return False  # whether it is gated is read in the transaction, and its key settled
    if request.on_success or request.on_failure:
        return False  # callbacks: their endpoints and chain depth are read in the transaction
    url = (request.delivery_overrides or {}).get("url")
    if url is not None and url_problem(url, _prefixes(endpoint)):
        return False  # a 422, unless the key is known: the transaction answers it
    return not endpoint.has_default_callbacks


def _prefixes(endpoint: EndpointRow) -> list[str] | None:
    spec = endpoint.spec if isinstance(endpoint.spec, dict) else {}
    return spec.get("allowed_url_prefixes")


def create(
    db: Database, item: NewJob, endpoint: EndpointRow, *, now: datetime, statement: Query
) -> JobView | None:
    """The created job's view, or None: nothing was written, take the full path.
    ``statement``: ``jobs_create`` or ``jobs_create_and_wake``, as the wake-up decided."""
    job = JobRow.build(item, endpoint, (None, None), now, fingerprint=endpoint.fingerprint)
    execution = ExecutionRow.of(job)
    assert execution is not None, "the fast path creates one-shot jobs only"
    [written] = db.statement(statement, **create_params([job], [execution]))
    if written["job_ids"]:
        return created_view(job, execution, written["now"])
    # Nothing written: the endpoint changed, or the key is taken, or (after a lost
    # connection) the first send committed it. Only the last is this request's own job.
    # One read by id on this rare path, rather than one on every statement's.
    mine = db.run(queries["jobs_get"], job_id=job.job_id)
    if mine:
        return created_view(job, execution, mine[0]["created_at"])
    return None
