"""GET /health and GET /metrics: what the database says about the whole deployment.

Processes: every process beats into its heartbeat row with its kind and until when it
counts as live (:mod:`chalicelib.health.heartbeat`). /metrics shows
``te_live_processes{kind}`` for api, scheduler and worker, always (0, never an absent
series, when none is live), and /health answers 503 ``PROCESS_DOWN`` naming each kind that
has run in the deployment with no live process now. Loops: each row also carries its
process's loops' states; /health answers 503 ``LOOP_DOWN`` while a recent one reports a
loop down, and /metrics shows ``te_loop_up{component,loop}``. Both are one read of
``region_heartbeats`` (index ranges bounded by the live processes).

Every figure is read from the database (``metrics.sql``), never from this process's
memory, so it is the same whichever API container answers and however many workers and
schedulers run. What was delivered comes from the summary rows every finalize adds to
(``delivery_counts``): counters (``*_total``, by endpoint, outcome and error type) that
never go down, for ``rate()`` and alerts, and gauges over the minute buckets of the last
:data:`WINDOW` (the current minute and the one before it). Lag is per endpoint and leaves
paused endpoints out (their backlog is an operator's choice, not a delay). No read counts
history: each follows the live backlog, the number of endpoints, or the summary rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from chalicelib.db.connection import Database, Transaction
from chalicelib.db.queries import queries
from chalicelib.domain import prometheus as prom
from chalicelib.domain.loops import API, KindLiveness, ReportedLoop, kinds_from_json, reported_loops
from chalicelib.errors import DatabaseError, DatabaseUnavailable

WINDOW = timedelta(seconds=60)
#: A heartbeat this recent counts (processes beat every 5 s: three beats' worth).
HEARTBEAT_FRESH = timedelta(seconds=15)
TERMINAL_STATUSES = ("SUCCESS", "FAILED", "CANCELLED")
EVENTS = ("cron_ticks_materialized", "reclaimed")
QUANTILES = ("0.5", "0.9", "0.99")
#: The upper bounds (ms) of delivery_counts' duration buckets (le_10 ... le_30000).
DURATION_BOUNDS_MS = (10, 50, 100, 250, 500, 1000, 5000, 30000)


@dataclass(frozen=True, kw_only=True)
class AttemptDurations:
    """Attempts finished in the window: how many, their total and quantiles (ms)."""

    count: int = 0
    total_ms: float = 0.0
    quantiles_ms: dict[str, float | None] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class MetricsSnapshot:
    """One consistent read of every figure GET /metrics shows."""

    queue_depth: Sequence[tuple[str, str, int]]  #: (status, endpoint, executions)
    oldest_due_lag_sec: float  #: 0 when nothing is due (paused endpoints left out)
    endpoint_lag_sec: tuple[tuple[str, float], ...] = ()  #: (endpoint, lag), not paused
    finished: dict[str, int]  #: terminal status -> executions finished in the window
    attempts: AttemptDurations
    events: dict[str, int]  #: cron_ticks_materialized / reclaimed in the window
    loops: tuple[ReportedLoop, ...] = ()  #: every loop of every process alive lately
    kinds: tuple[KindLiveness, ...] = ()  #: live processes of each kind
    #: since counting began: (endpoint, outcome, attempts, executions ended), by endpoint
    #: and outcome, and (endpoint, error type, attempts) of the failed ones
    totals: Sequence[tuple[str, str, int, int]] = ()
    failed: Sequence[tuple[str, str, int]] = ()
    #: (endpoint, reason, pauses): automatic pauses ever counted, per live endpoint
    auto_paused: Sequence[tuple[str, str, int]] = ()
    #: (endpoint, blocked ordering keys), for endpoints that have some or block
    ordering_blocked: Sequence[tuple[str, int]] = ()


@dataclass(frozen=True)
class HealthState:
    """What GET /health judges: the kinds with no live process, the loops down."""

    kinds: tuple[KindLiveness, ...]
    loops_down: tuple[ReportedLoop, ...]

    @property
    def kinds_down(self) -> list[str]:
        """The kinds that have run in the deployment and have no live process now (the API
        answering is one: only a worker or a scheduler can be missing)."""
        return [k.kind for k in self.kinds if k.down and k.kind != API]


def oldest_due(tx: Transaction, now: datetime) -> datetime | None:
    """The run_at of the oldest due execution, paused endpoints left out (metrics_oldest_due,
    a few probes): the queue_health line's lag. GET /metrics and GET /overview read the same
    part inside their one-statement snapshots."""
    return tx.scalar(queries["metrics_oldest_due"], now=now)


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

    def health(self) -> HealthState:
        """The kinds of process and the loops the heartbeats show (one indexed read, which
        is also the database check: :class:`DatabaseUnavailable` if it does not answer)."""
        try:
            [row] = self._db.run(
                queries["health_state"], now=self._clock(), fresh_since=self._fresh_since()
            )
        except DatabaseError as exc:
            raise DatabaseUnavailable(f"health check: {exc.message}") from exc
        return HealthState(
            kinds=tuple(kinds_from_json(row["kinds"])),
            loops_down=tuple(loop for loop in _loops(row["beats"]) if loop.down),
        )

    def _fresh_since(self) -> datetime:
        return self._clock() - HEARTBEAT_FRESH

    def snapshot(self) -> MetricsSnapshot:
        """Every figure in one statement (metrics_snapshot): one round trip, one snapshot."""
        now = self._clock()
        since = now - WINDOW
        [row] = self._db.statement(  # a read: sent again after a lost connection
            queries["metrics_snapshot"],
            now=now,
            buckets_since=since.replace(second=0, microsecond=0),
            until=now,
            window_since=since,
            fresh_since=self._fresh_since(),
        )
        return MetricsSnapshot(
            queue_depth=row["depth"],
            oldest_due_lag_sec=_seconds_past(row["oldest_lag"]),
            endpoint_lag_sec=tuple((endpoint, _seconds_past(s)) for endpoint, s in row["lag"]),
            finished=dict.fromkeys(TERMINAL_STATUSES, 0)
            | {status: int(n) for status, n in row["ended"]},
            attempts=_durations(row["durations"]),
            events=dict.fromkeys(EVENTS, 0) | {event: int(n) for event, n in row["events"]},
            loops=tuple(_loops(row["beats"])),
            kinds=tuple(kinds_from_json(row["kinds"])),
            totals=row["totals"][0],
            failed=row["totals"][1],
            auto_paused=row["auto_paused"],
            ordering_blocked=[(str(e), int(n)) for e, n in row["ordering_blocked"]],
        )

    def exposition(self) -> str:
        """The Prometheus text (format 0.0.4) of a fresh snapshot."""
        return prom.render(families(self.snapshot()))


def _loops(beats: Iterable[Sequence[Any]]) -> list[ReportedLoop]:
    """Every loop the heartbeats ((component, metadata) pairs) report; a row of an
    unexpected shape reports none (:func:`reported_loops` never raises: an odd row must
    not break /health)."""
    return [
        loop for component, metadata in beats for loop in reported_loops(str(component), metadata)
    ]


def _seconds_past(value: Any) -> float:
    """A lag the database computed (seconds, numeric or JSON number), never negative."""
    return max(0.0, float(value))


def _durations(row: Sequence[Any] | None) -> AttemptDurations:
    """[attempts, total ms, then the cumulative counts at DURATION_BOUNDS_MS]."""
    if row is None or not row[0]:
        return AttemptDurations(quantiles_ms=dict.fromkeys(QUANTILES))
    total = int(row[0])
    cumulative = [int(n) for n in row[2:]]
    return AttemptDurations(
        count=total,
        total_ms=float(row[1]),
        quantiles_ms={
            q: prom.bucket_quantile(float(q), DURATION_BOUNDS_MS, cumulative, total)
            for q in QUANTILES
        },
    )


def families(snap: MetricsSnapshot) -> list[prom.Family]:
    """The snapshot as metric families (names and help texts are the public contract)."""
    window = "in the current minute and the one before it"
    attempts = snap.attempts
    return [
        prom.counter(
            "te_delivery_attempts",
            "Delivery attempts recorded, by endpoint and outcome (SUCCESS, FAILED).",
            [(e, o, n) for e, o, n, _ in snap.totals],
            ("endpoint", "outcome"),
        ),
        prom.counter(
            "te_delivery_attempts_failed",
            "Failed delivery attempts (retried or not), by endpoint and error type.",
            snap.failed,
            ("endpoint", "error_type"),
        ),
        prom.counter(
            "te_executions_ended",
            "Executions ended by a delivery attempt, by endpoint and status (SUCCESS, "
            "FAILED: dead letters).",
            [(e, o, n) for e, o, _, n in snap.totals],
            ("endpoint", "status"),
        ),
        prom.counter(
            "te_endpoint_auto_paused",
            "Times an endpoint paused itself, by endpoint and reason (GONE: an HTTP target "
            "answered 410; FAILING: every attempt failed for longer than its "
            "auto_pause_after_ms). 0 until the first.",
            snap.auto_paused,
            ("endpoint", "reason"),
        ),
        prom.gauge(
            "te_endpoint_lag_seconds",
            "Per endpoint that is not paused: how long its oldest due execution (QUEUED or "
            "RETRYING) has waited past its run_at; 0 when nothing is due.",
            snap.endpoint_lag_sec,
            ("endpoint",),
        ),
        prom.gauge(
            "te_ordering_keys_blocked",
            "Ordering keys waiting on a failed head for an operator's retry or skip, by "
            "endpoint (endpoints whose ordering.on_failure is block, and any with such keys).",
            snap.ordering_blocked,
            ("endpoint",),
        ),
        prom.gauge(
            "te_queue_depth",
            "Executions not yet finished, by status and endpoint (RUNNING now; PENDING,"
            " QUEUED and RETRYING as the scheduler last counted them, every 15 s).",
            snap.queue_depth,
            ("status", "endpoint"),
        ),
        prom.gauge(
            "te_oldest_due_lag_seconds",
            "How long the oldest due work has waited past its time: an execution not "
            "claimed (QUEUED, RETRYING; paused endpoints left out), a DELAYED run not "
            "promoted, a cron tick not materialized; 0 when nothing is due.",
            [(snap.oldest_due_lag_sec,)],
        ),
        prom.gauge(
            "te_executions_finished_last_minute",
            f"Executions that reached a terminal status {window}, by status.",
            sorted(snap.finished.items()),
            ("status",),
        ),
        prom.gauge(
            "te_attempt_duration_seconds",
            f"Quantiles of the durations of delivery attempts finished {window}, "
            "estimated from buckets bounded at "
            + ", ".join(f"{b} ms" for b in DURATION_BOUNDS_MS)
            + " (NaN when none finished).",
            [(q, _seconds(attempts.quantiles_ms.get(q))) for q in QUANTILES],
            ("quantile",),
        ),
        prom.gauge(
            "te_attempts_finished_last_minute",
            f"Delivery attempts finished {window}.",
            [(attempts.count,)],
        ),
        prom.gauge(
            "te_cron_ticks_materialized_last_minute",
            f"Cron ticks materialized into executions by all schedulers {window}.",
            [(snap.events["cron_ticks_materialized"],)],
        ),
        prom.gauge(
            "te_executions_reclaimed_last_minute",
            f"RUNNING executions taken back from lost workers by all schedulers {window}.",
            [(snap.events["reclaimed"],)],
        ),
        prom.gauge(
            "te_live_processes",
            "Processes of each kind (api, scheduler, worker) whose heartbeat is fresh: beaten "
            "within its interval (5 s) or, for a scheduled Lambda invocation, within the "
            "minute until the next one, plus 10 s of grace. Always present: 0 when none is.",
            [(k.kind, k.live) for k in snap.kinds],
            ("kind",),
        ),
        prom.gauge(
            "te_loop_up",
            "1 while a background loop of a process that beat in the last "
            f"{int(HEARTBEAT_FRESH.total_seconds())} s runs, 0 while it is down (restarting, "
            "or failing 3 times in a row on anything but a database outage).",
            [(loop.component, loop.loop, 0 if loop.down else 1) for loop in snap.loops],
            ("component", "loop"),
        ),
    ]


def _seconds(ms: float | None) -> float:
    return float("nan") if ms is None else ms / 1000.0
