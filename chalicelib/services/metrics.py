"""GET /health and GET /metrics: what the database says about the whole deployment.

Loops: every process writes its loops' states into its heartbeat row
(:mod:`chalicelib.health.heartbeat`); /health reads the recent rows (one index range) and
answers 503 ``LOOP_DOWN`` while one reports a loop down, and /metrics shows
``te_loop_up{component,loop}``.

Every figure is read from the database (``metrics.sql``), never from this process's
memory, so it is the same whichever API container answers and however many workers and
schedulers run. Windowed figures cover the last :data:`WINDOW` (one minute): a scrape
reads one minute of index whatever the history's size. They are gauges (the amount in the
window), not counters: purged history cannot back a counter that never goes down.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from chalicelib.db.connection import Database, Transaction
from chalicelib.db.queries import queries
from chalicelib.domain import prometheus as prom
from chalicelib.domain.loops import ReportedLoop, reported_loops
from chalicelib.domain.prometheus import Sample
from chalicelib.errors import DatabaseError, DatabaseUnavailable

WINDOW = timedelta(seconds=60)
#: A heartbeat this recent counts (processes beat every 5 s: three beats' worth).
HEARTBEAT_FRESH = timedelta(seconds=15)
TERMINAL_STATUSES = ("SUCCESS", "FAILED", "CANCELLED")
EVENTS = ("cron_ticks_materialized", "reclaimed")
QUANTILES = (("0.5", "p50"), ("0.9", "p90"), ("0.99", "p99"))


@dataclass(frozen=True, kw_only=True)
class AttemptDurations:
    """Attempts finished in the window: how many, their total and quantiles (ms)."""

    count: int = 0
    total_ms: float = 0.0
    quantiles_ms: dict[str, float | None] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class MetricsSnapshot:
    """One consistent read of every figure GET /metrics shows."""

    queue_depth: tuple[tuple[str, str, int], ...]  #: (status, endpoint, executions)
    oldest_due_lag_sec: float  #: 0 when nothing is due
    finished: dict[str, int]  #: terminal status -> executions finished in the window
    attempts: AttemptDurations
    events: dict[str, int]  #: cron_ticks_materialized / reclaimed in the window
    loops: tuple[ReportedLoop, ...] = ()  #: every loop of every process alive lately


class MetricsService:
    """Reads the snapshot and renders it; pings the database for /health."""

    def __init__(self, db: Database, clock: Callable[[], datetime]) -> None:
        self._db = db
        self._clock = clock

    def ping(self) -> None:
        """Raise :class:`DatabaseUnavailable` (503) unless the database answers now."""
        try:
            self._db.run(queries["metrics_health_ping"])
        except DatabaseError as exc:
            raise DatabaseUnavailable(f"health check: {exc.message}") from exc

    def health(self) -> list[ReportedLoop]:
        """The loops that recent heartbeats report down (one indexed read, which is also
        the database check: :class:`DatabaseUnavailable` if it does not answer)."""
        try:
            rows = self._db.run(queries["metrics_loop_states"], since=self._fresh_since())
        except DatabaseError as exc:
            raise DatabaseUnavailable(f"health check: {exc.message}") from exc
        return [loop for loop in _loops(rows) if loop.down]

    def _fresh_since(self) -> datetime:
        return self._clock() - HEARTBEAT_FRESH

    def snapshot(self) -> MetricsSnapshot:
        now = self._clock()
        since = now - WINDOW

        def read(tx: Transaction) -> MetricsSnapshot:
            depth = tx.run(queries["metrics_queue_depth"])
            oldest = tx.one(queries["metrics_oldest_due"], now=now)
            finished = tx.run(queries["metrics_finished_since"], since=since)
            durations = tx.one(queries["metrics_attempt_durations"], since=since)
            events = tx.run(queries["metrics_events_since"], since=since)
            beats = tx.run(queries["metrics_loop_states"], since=self._fresh_since())
            oldest_at = oldest["oldest_run_at"] if oldest else None
            return MetricsSnapshot(
                queue_depth=tuple((r["status"], r["endpoint"], int(r["n"])) for r in depth),
                oldest_due_lag_sec=max(0.0, (now - oldest_at).total_seconds())
                if oldest_at
                else 0.0,
                finished={s: 0 for s in TERMINAL_STATUSES}
                | {r["status"]: int(r["n"]) for r in finished},
                attempts=_durations(durations),
                events=dict.fromkeys(EVENTS, 0) | {r["event"]: int(r["n"]) for r in events},
                loops=tuple(_loops(beats)),
            )

        return self._db.transaction(read, name="metrics_snapshot")

    def exposition(self) -> str:
        """The Prometheus text (format 0.0.4) of a fresh snapshot."""
        return prom.render(families(self.snapshot()))


def _loops(rows: list[dict[str, Any]]) -> list[ReportedLoop]:
    """Every loop the heartbeat rows report; a row of an unexpected shape reports none
    (:func:`reported_loops` never raises: an odd row must not break /health)."""
    return [loop for row in rows for loop in reported_loops(str(row["component"]), row["metadata"])]


def _durations(row: dict[str, Any] | None) -> AttemptDurations:
    if row is None or not row["n"]:
        return AttemptDurations(quantiles_ms={q: None for q, _ in QUANTILES})
    return AttemptDurations(
        count=int(row["n"]),
        total_ms=float(row["total_ms"]),
        quantiles_ms={q: float(row[column]) for q, column in QUANTILES},
    )


def families(snap: MetricsSnapshot) -> list[prom.Family]:
    """The snapshot as metric families (names and help texts are the public contract)."""
    window = f"in the last {int(WINDOW.total_seconds())} s"
    attempts = snap.attempts
    return [
        prom.gauge(
            "te_queue_depth",
            "Executions not yet finished, by status and endpoint.",
            (Sample(value=n, labels={"status": s, "endpoint": e}) for s, e, n in snap.queue_depth),
        ),
        prom.gauge(
            "te_oldest_due_lag_seconds",
            "How long the oldest due execution (PENDING, QUEUED or RETRYING) has waited "
            "past its run_at; 0 when nothing is due.",
            [Sample(value=snap.oldest_due_lag_sec)],
        ),
        prom.gauge(
            "te_executions_finished_last_minute",
            f"Executions that reached a terminal status {window}, by status.",
            (Sample(value=n, labels={"status": s}) for s, n in sorted(snap.finished.items())),
        ),
        prom.gauge(
            "te_attempt_duration_seconds",
            f"Quantiles of the durations of delivery attempts finished {window} "
            "(NaN when none finished).",
            (
                Sample(value=_seconds(attempts.quantiles_ms.get(q)), labels={"quantile": q})
                for q, _ in QUANTILES
            ),
        ),
        prom.gauge(
            "te_attempts_finished_last_minute",
            f"Delivery attempts finished {window}.",
            [Sample(value=attempts.count)],
        ),
        prom.gauge(
            "te_cron_ticks_materialized_last_minute",
            f"Cron ticks materialized into executions by all schedulers {window}.",
            [Sample(value=snap.events["cron_ticks_materialized"])],
        ),
        prom.gauge(
            "te_executions_reclaimed_last_minute",
            f"RUNNING executions taken back from lost workers by all schedulers {window}.",
            [Sample(value=snap.events["reclaimed"])],
        ),
        _loop_up(snap.loops),
    ]


def _loop_up(loops: tuple[ReportedLoop, ...]) -> prom.Family:
    return prom.gauge(
        "te_loop_up",
        "1 while a background loop of a process that beat in the last "
        f"{int(HEARTBEAT_FRESH.total_seconds())} s runs, 0 while it is down (restarting, "
        "or failing 3 times in a row on anything but a database outage).",
        (
            Sample(
                value=0 if loop.down else 1,
                labels={"component": loop.component, "loop": loop.loop},
            )
            for loop in loops
        ),
    )


def _seconds(ms: float | None) -> float:
    return float("nan") if ms is None else ms / 1000.0
