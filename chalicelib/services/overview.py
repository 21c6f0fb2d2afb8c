"""The operator's overview (``GET /overview``): the dashboard's first screen in one read.

Executions by status (every live one; those that ended in the last day), attempts per
minute over the last hour, the lag of the oldest due execution, the worker processes whose
heartbeats were seen, and per endpoint its health: its executions that ended in the last
day by outcome (from the delivery summary rows) and those live now, judged by
:func:`chalicelib.domain.health.compute_health`, the definition ``GET /jobs/{id}/status``
applies to a job. Read in one statement (``overview_snapshot``), at the service clock's
``now``.

Nothing here counts rows per execution or per attempt: the waiting work comes from the
delayed promoter's live counts and the running from the rows the workers hold
(``metrics_queue_depth``); what was delivered from the summary rows (``delivery_counts``,
migrations 017 and 019): the housekeeper's roll-ups (a total per endpoint, outcome and
error type, an hourly mark of them, a row per minute for all endpoints) plus the few
minutes each writer added since. "The last day" is since the last hourly mark at or
before 24 hours ago (24 to 25 hours; everything counted so far while there is no such
mark). So a dashboard left open polls at a cost that follows the number of endpoints,
never the history, the backlog or the traffic. The lag leaves paused endpoints out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from chalicelib.db.connection import Database
from chalicelib.db.queries import queries
from chalicelib.domain.health import WINDOW as HEALTH_WINDOW
from chalicelib.domain.health import Health, compute_health
from chalicelib.domain.statuses import ExecutionStatus

WINDOW = timedelta(hours=1)
#: Cancelled executions are counted over this window (SUCCESS and FAILED over the health
#: window, the same day, from the summary rows).
ENDED_WINDOW = HEALTH_WINDOW
WINDOW_MINUTES = 60
#: A worker beats every 5 s: one silent for longer than this is shown DEAD.
WORKER_SILENCE = timedelta(seconds=30)


@dataclass(frozen=True, kw_only=True)
class MinuteCounts:
    """Attempts that finished within one minute (``minute`` is its start, UTC)."""

    minute: datetime
    succeeded: int
    failed: int


@dataclass(frozen=True, kw_only=True)
class WorkerSeen:
    """One worker process's latest heartbeat; ``status`` is ALIVE or DEAD."""

    component: str
    status: str
    last_beat_at: datetime


@dataclass(frozen=True, kw_only=True)
class EndpointHealth:
    """An endpoint's executions of the health window (ended in it, or live now), the ended
    ones by outcome, and its health."""

    endpoint: str
    total: int
    succeeded: int
    failed: int

    @property
    def health(self) -> Health:
        return compute_health(total=self.total, succeeded=self.succeeded, failed=self.failed)


@dataclass(frozen=True, kw_only=True)
class Overview:
    """Everything ``GET /overview`` shows."""

    executions_by_status: dict[str, int]
    last_hour: list[MinuteCounts]
    oldest_due_lag_ms: int | None
    workers: list[WorkerSeen]
    endpoints: list[EndpointHealth]


def minute_series(
    rows: Iterable[tuple[datetime, int | None, int | None]], now: datetime
) -> list[MinuteCounts]:
    """Sixty minutes ending with the current one, oldest first, zeros where nothing ran
    (``rows``: minute, attempts succeeded, failed)."""
    by_minute = {minute: (succeeded, failed) for minute, succeeded, failed in rows}
    current = now.replace(second=0, microsecond=0)
    series = []
    for back in range(WINDOW_MINUTES - 1, -1, -1):
        minute = current - timedelta(minutes=back)
        succeeded, failed = by_minute.get(minute, (0, 0))
        series.append(
            MinuteCounts(minute=minute, succeeded=int(succeeded or 0), failed=int(failed or 0))
        )
    return series


def worker_status(stored: str, last_beat_at: datetime, now: datetime) -> str:
    """DEAD when the worker said so (graceful stop) or has been silent too long."""
    if stored == "DEAD" or now - last_beat_at > WORKER_SILENCE:
        return "DEAD"
    return "ALIVE"


@dataclass(frozen=True)
class OverviewService:
    """Reads the overview at ``clock()``."""

    db: Database
    clock: Callable[[], datetime]

    def endpoint_health(self) -> dict[str, Health]:
        """The health of each endpoint with executions in the window (the others are
        IDLE), as the overview shows it: what GET /endpoints?health= filters by."""
        return {e.endpoint: e.health for e in self.overview().endpoints}

    def overview(self) -> Overview:
        """Everything in one statement (overview_snapshot): one round trip, one snapshot."""
        now = self.clock()
        [row] = self.db.statement(  # a read: sent again after a lost connection
            queries["overview_snapshot"],
            now=now,
            until=now,
            health_since=now - HEALTH_WINDOW,
            cancelled_since=now - ENDED_WINDOW,
            # The series starts at the first of its 60 minutes, not an hour before now.
            series_since=now.replace(second=0, microsecond=0)
            - timedelta(minutes=WINDOW_MINUTES - 1),
            workers_since=now - WINDOW,
        )
        counts = {status.value: 0 for status in ExecutionStatus}
        live: dict[str, int] = {}  # endpoint -> executions not yet ended
        for status, endpoint, n in row["depth"]:
            counts[status] += int(n)
            live[endpoint] = live.get(endpoint, 0) + int(n)
        ended = {  # endpoint -> (succeeded, failed) that ended in the health window
            endpoint: (int(succeeded or 0), int(failed or 0))
            for endpoint, succeeded, failed in row["health"]
        }
        counts["SUCCESS"] = sum(succeeded for succeeded, _ in ended.values())
        counts["FAILED"] = sum(failed for _, failed in ended.values())
        counts["CANCELLED"] = int(row["cancelled"])
        lag = row["oldest_lag"]  # seconds, NULL when nothing is due
        return Overview(
            executions_by_status=counts,
            last_hour=minute_series(
                ((datetime.fromisoformat(m), s, f) for m, s, f in row["last_hour"]), now
            ),
            oldest_due_lag_ms=None if lag is None else max(0, int(lag * 1000)),
            workers=[
                _worker(component, status, seen, now) for component, status, seen in row["workers"]
            ],
            endpoints=_endpoint_health(ended, live),
        )


def _worker(component: str, status: str, last_beat_at: str, now: datetime) -> WorkerSeen:
    """A worker's heartbeat row as the snapshot sends it (its time as ISO text)."""
    seen = datetime.fromisoformat(last_beat_at)
    return WorkerSeen(
        component=component, status=worker_status(status, seen, now), last_beat_at=seen
    )


def _endpoint_health(
    by_name: dict[str, tuple[int, int]], live: dict[str, int]
) -> list[EndpointHealth]:
    """Each endpoint with executions that ended in the window (``by_name``: succeeded,
    failed) or are live now: ``total`` counts both, the outcomes count the ended ones (what
    :func:`compute_health` judges)."""
    return [
        EndpointHealth(
            endpoint=name,
            total=sum(by_name.get(name, (0, 0))) + live.get(name, 0),
            succeeded=by_name.get(name, (0, 0))[0],
            failed=by_name.get(name, (0, 0))[1],
        )
        for name in sorted(set(by_name) | set(live))
    ]
