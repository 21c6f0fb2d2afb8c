"""``POST /jobs {"topic": NAME}``: one job per endpoint of a topic, on the one creation path.

The request is parsed once (:func:`chalicelib.domain.topics.parse_topic_job`) and expanded
into one :class:`~chalicelib.services.jobs.rows.NewJob` per endpoint of the topic. From
there it is :mod:`.create`'s path, as a batch of items: the inputs are checked against each
endpoint's payload spec before the transaction (:func:`.create.check_inputs`, one budget),
then one transaction reads the topic again, looks up the request's key, and writes every
job and one-shot execution with one ``jobs_create`` (:func:`.create.create_jobs`).

* **All or nothing.** Any item's refusal (an input its endpoint's payload spec refuses, a
  callback) is the request's answer, and the transaction rolls back: nothing is written.
* **The key deduplicates per topic.** Every job holds ``topic:<topic>:<key>`` on its own
  endpoint (:func:`chalicelib.domain.topics.topic_key`). When any of the topic's endpoints
  already holds that key, the request is a repeat: it answers 200 with the jobs found and
  writes nothing, whatever its body (as ``POST /jobs`` does for a known key), and whatever
  endpoints were added to the topic since.

A request without ``topic`` never comes here: the route sends it to
:meth:`~chalicelib.services.jobs.service.JobService.create` as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from chalicelib.db.connection import Database, Transaction
from chalicelib.db.queries import queries
from chalicelib.domain.jobs import JobRequest
from chalicelib.domain.payload_specs import request_budget
from chalicelib.domain.topics import fan_out
from chalicelib.errors import TopicNotFound
from chalicelib.services.jobs import fastpath
from chalicelib.services.jobs.create import (
    CheckedInputs,
    Endpoints,
    Outcome,
    Wake,
    check_inputs,
    create_jobs,
    find_existing,
)
from chalicelib.services.jobs.rows import EndpointRow, JobView, NewJob
from chalicelib.services.topics import topic_endpoints_in


@dataclass(frozen=True)
class FanOut:
    """What a topic's request answers: its jobs in the topic's order, and whether they
    were created now (201) or found by the request's key (200)."""

    topic: str
    views: list[JobView]
    created: bool


def create_fan_out(
    db: Database,
    topic: str,
    request: JobRequest,
    *,
    now: datetime,
    known: fastpath.KnownEndpoints,
    wake: Wake,
) -> FanOut:
    """Create ``request``'s job on every endpoint of ``topic`` in one transaction (see the
    module). ``request`` carries the topic's key already; ``known`` as for POST /jobs."""
    listed = _endpoints_outside(db, topic)
    with request_budget():  # spent before any transaction
        checked = check_inputs(db, _items(request, listed), known=known)

    def work(tx: Transaction) -> tuple[FanOut, list[Outcome], list[EndpointRow]]:
        endpoints = Endpoints(tx)
        items = _items(request, topic_endpoints_in(tx, topic))
        result, outcomes = _create_in(tx, topic, items, now, checked, wake, endpoints)
        return result, outcomes, endpoints.read()

    result, outcomes, read = db.transaction(work, name="job_fan_out")
    known.remember(read)
    wake.after_commit(outcomes)
    return result


def _endpoints_outside(db: Database, topic: str) -> list[str]:
    """The topic's endpoints, read outside any transaction to check the inputs against
    (the transaction reads them again); 404 TOPIC_NOT_FOUND."""
    rows = db.run(queries["catalogue_topic_get"], name=topic)
    if not rows:
        raise TopicNotFound(f"Topic '{topic}' does not exist.")
    return list(rows[0]["value"])


def _items(request: JobRequest, endpoints: Sequence[str]) -> list[NewJob]:
    return [NewJob(job) for job in fan_out(request, endpoints)]


def _create_in(
    tx: Transaction,
    topic: str,
    items: list[NewJob],
    now: datetime,
    checked: CheckedInputs,
    wake: Wake,
    endpoints: Endpoints,
) -> tuple[FanOut, list[Outcome]]:
    """In ``tx``: the jobs already holding the request's key, else every item created (the
    first refusal raised, which rolls the transaction back)."""
    keys = [(i.request.endpoint, i.request.idempotency_key) for i in items]
    found = find_existing(tx, [(e, k) for e, k in keys if k is not None])
    if found:
        views = [found[key] for key in keys if key in found]
        return FanOut(topic, views, created=False), []
    outcomes = create_jobs(tx, items, now=now, checked=checked, wake=wake, endpoints=endpoints)
    views = [outcome.raise_error() for outcome in outcomes]
    return FanOut(topic, views, created=any(o.created for o in outcomes)), outcomes
