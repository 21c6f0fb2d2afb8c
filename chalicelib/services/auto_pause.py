"""Endpoints that pause themselves, inside the transactions that find out.

Two callers, one pause (:func:`pause`, the ``auto_pause_endpoints`` statement):

* the worker's finalize, for a batch that holds an HTTP attempt answered ``410 Gone``
  (reason ``GONE``): in the transaction that records the attempt, before the refill claim,
  which then passes the endpoint over. A batch without such an answer runs nothing here.
* the housekeeper's pass (:class:`FailingWatch`, reason ``FAILING``): a page of endpoints,
  judged by :func:`chalicelib.domain.auto_pause.judge` from their attempt counts.

A pause is the endpoint's ordinary pause (``paused_at``; the claim passes it over, its work
waits QUEUED/RETRYING; ``POST /endpoints/{name}/resume`` ends it and clears the reason),
with ``paused_reason`` saying why. Only an endpoint that is not paused yet is paused, so a
pause is counted once (``endpoint_auto_pauses``, te_endpoint_auto_paused_total) whatever
retries or races. When ``TE_OPERATOR_ENDPOINT`` names an endpoint, each automatic pause
also creates, in the same transaction and by the one job-creation path, an IMMEDIATE job on
it whose input is ``{"type": "endpoint.paused", "endpoint", "reason", "at"}``, keyed
``endpoint.paused:<endpoint>:<paused_at>`` so one pause makes one job. If that endpoint
does not exist (or was deleted), the pause happens, no job is created, and a warning says
so; if it is paused, its job waits like the rest of its work until it is resumed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from chalicelib.db.connection import Database, Row, Transaction
from chalicelib.db.queries import queries
from chalicelib.domain.auto_pause import PausedReason, Watch, event, judge
from chalicelib.domain.jobs import JobRequest, pause_event_key
from chalicelib.domain.statuses import TriggerType
from chalicelib.domain.timefmt import iso
from chalicelib.logs import log_event
from chalicelib.services.callbacks import create_isolated
from chalicelib.services.jobs.rows import NewJob

log = logging.getLogger(__name__)

#: Endpoints the FAILING rule reads and judges per transaction.
WATCH_BATCH = 500


@dataclass(frozen=True, kw_only=True)
class Paused:
    """An endpoint that a statement paused: why and when."""

    endpoint: str
    reason: PausedReason
    at: datetime


def pause(
    tx: Transaction,
    names: Iterable[str],
    reason: PausedReason,
    *,
    now: datetime,
    operator_endpoint: str | None,
) -> list[Paused]:
    """Pause those of ``names`` that are live and not paused, count each pause, and send
    each one's event to ``operator_endpoint`` (None: no event), all in ``tx``."""
    wanted = sorted(set(names))
    if not wanted:
        return []
    rows = tx.run(queries["auto_pause_endpoints"], names=wanted, reason=str(reason), now=now)
    paused = [Paused(endpoint=r["endpoint"], reason=reason, at=r["paused_at"]) for r in rows]
    for each in paused:
        log_event(
            log,
            "endpoint_auto_paused",
            logging.WARNING,
            endpoint=each.endpoint,
            reason=reason,
            count=1,  # what the CloudWatch metric filter sums (infra/stacks/observability.py)
        )
    if paused and operator_endpoint:
        _send_events(tx, paused, operator_endpoint, now)
    return paused


def forget(tx: Transaction, endpoint: str) -> None:
    """Drop what the FAILING rule remembered of ``endpoint``'s name (its registration: a
    deleted endpoint's stretch is not the new one's)."""
    tx.run(queries["auto_pause_forget"], endpoint=endpoint)


def _send_events(tx: Transaction, paused: list[Paused], operator: str, now: datetime) -> None:
    """One IMMEDIATE job per pause on ``operator`` (the job-creation path; an item it refuses,
    such as an endpoint that does not exist, is logged and the pause stands)."""
    items = [
        NewJob(
            JobRequest(
                endpoint=operator,
                trigger=TriggerType.IMMEDIATE,
                idempotency_key=pause_event_key(each.endpoint, each.at),
                input=event(each.endpoint, each.reason, iso(each.at) or ""),
            ),
            depth=1,
            system=True,
        )
        for each in paused
    ]
    for each, outcome in zip(paused, create_isolated(tx, items, now), strict=True):
        if outcome.error is not None:
            log_event(
                log,
                "endpoint_paused_event_not_sent",
                logging.WARNING,
                endpoint=each.endpoint,
                operator_endpoint=operator,
                error=outcome.error.message,
            )


class FailingWatch:
    """The FAILING rule, a page of endpoints per :meth:`run`: reads their attempt counts and
    what the last pass remembered, saves what changed, pauses those failing too long.

    The page's cursor (the last endpoint name) is this object's: a full page makes the next
    call continue after it, a short one starts over. Several schedulers may run it at once:
    each pass is one SERIALIZABLE transaction, and a pause is counted once."""

    def __init__(
        self,
        db: Database,
        *,
        operator_endpoint: str | None,
        batch_size: int = WATCH_BATCH,
    ) -> None:
        self._db = db
        self._operator = operator_endpoint
        self._batch = batch_size
        self._after = ""

    def run(self, now: datetime) -> tuple[list[Paused], bool]:
        """One page judged at ``now``: (the endpoints paused, the page was full)."""
        count, last, paused = self._db.transaction(
            lambda tx: self._judge_page(tx, now), name="auto_pause_watch"
        )
        full = count >= self._batch
        self._after = last if full else ""
        return paused, full

    def _judge_page(self, tx: Transaction, now: datetime) -> tuple[int, str, list[Paused]]:
        rows = tx.run(queries["auto_pause_watch_page"], after=self._after, batch=self._batch)
        changed: list[list[Any]] = []
        failing: list[str] = []
        for row in rows:
            seen = _seen(row)
            verdict = judge(
                seen,
                succeeded=int(row["succeeded"]),
                failed=int(row["failed"]),
                paused=bool(row["paused"]),
                window_ms=row["auto_pause_after_ms"],
                now=now,
            )
            if verdict.watch != seen:
                w = verdict.watch
                changed.append([row["endpoint"], w.succeeded, w.failed, iso(w.failing_since)])
            if verdict.pause:
                failing.append(row["endpoint"])
        if changed:
            tx.execute(queries["auto_pause_watch_save"], rows=json.dumps(changed), now=now)
        paused = pause(tx, failing, PausedReason.FAILING, now=now, operator_endpoint=self._operator)
        return len(rows), rows[-1]["endpoint"] if rows else "", paused


def _seen(row: Row) -> Watch | None:
    if row["seen_succeeded"] is None:
        return None
    return Watch(
        succeeded=int(row["seen_succeeded"]),
        failed=int(row["seen_failed"]),
        failing_since=row["failing_since"],
    )
