"""A stopped process never goes unseen: heartbeats by kind, ``te_live_processes{kind}``,
``GET /health``'s ``PROCESS_DOWN``, the lag of work nobody picks up, ``GET /health/live``.

Heartbeat rows are written by the real writer (with a clock set where each case needs it)
and read by the real API over the test database. The whole stack with a process killed is
tests/integration/test_process_alerts.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from chalicelib.db.connection import Database
from chalicelib.health.heartbeat import (
    ALIVE,
    DEAD,
    GRACE_SEC,
    SCHEDULER,
    WORKER,
    BeatWhenServing,
    HeartbeatWriter,
    live_processes,
)
from chalicelib.scheduler.housekeeper import HEARTBEAT_TTL, Housekeeper
from chalicelib.scheduler.lambdas import SCHEDULE_PERIOD_SEC
from tests.integration.test_lifecycle_plans import indexes_used
from tests.integration.test_metrics import scrape
from tests.support.api_client import ApiClient
from tests.support.clock import FakeClock


def live(api: ApiClient) -> dict[str, float]:
    return {
        dict(labels)["kind"]: value
        for (name, labels), value in scrape(api).items()
        if name == "te_live_processes"
    }


def writer(database: Database, kind: str, component: str, at: datetime) -> HeartbeatWriter:
    return HeartbeatWriter(database, kind=kind, component=component, clock=FakeClock(at))


def test_every_kind_is_a_series_even_before_any_process_ran(api: ApiClient) -> None:
    # The scraping API process beat first; no worker or scheduler has ever run: 0, present.
    assert live(api) == {"api": 1, "scheduler": 0, "worker": 0}
    assert api.get("/health", auth=False).status == 200  # nothing that ran has stopped


def test_a_beat_says_its_kind_and_until_when_it_counts(database: Database) -> None:
    now = datetime.now(UTC)
    beat = writer(database, WORKER, "worker@h:1", now)
    beat.beat()
    [row] = database.run("SELECT kind, fresh_until FROM region_heartbeats")
    assert row["kind"] == "worker"
    assert row["fresh_until"] == now + timedelta(seconds=5 + GRACE_SEC)
    beat.beat(ALIVE, next_beat_in=SCHEDULE_PERIOD_SEC)  # a scheduled invocation's last beat
    [row] = database.run("SELECT fresh_until FROM region_heartbeats")
    assert row["fresh_until"] == now + timedelta(seconds=SCHEDULE_PERIOD_SEC + GRACE_SEC)
    beat.beat(DEAD)  # a graceful stop: live no longer
    [row] = database.run("SELECT fresh_until FROM region_heartbeats")
    assert row["fresh_until"] == now
    with pytest.raises(ValueError, match="kind"):
        HeartbeatWriter(database, kind="cron", component="x")


def test_a_silent_scheduler_reads_0_and_health_names_it(api: ApiClient, database: Database) -> None:
    now = datetime.now(UTC)
    writer(database, WORKER, "worker@h:1", now).beat()
    # Its last beat 16 s ago: due 5 s after, 10 s of grace: stale (a kill -9 looks so).
    writer(database, SCHEDULER, "scheduler@h:2", now - timedelta(seconds=16)).beat()
    assert live(api) == {"api": 1, "scheduler": 0, "worker": 1}
    reply = api.get("/health", auth=False)
    assert (reply.status, reply.error_code) == (503, "PROCESS_DOWN")
    assert reply.body["error"]["kinds"] == ["scheduler"]
    assert "scheduler" in reply.body["error"]["message"]
    assert "h:2" not in str(reply.body)  # no key needed: no host names
    # A second scheduler starts: the kind is live again.
    writer(database, SCHEDULER, "scheduler@h:3", datetime.now(UTC)).beat()
    assert live(api)["scheduler"] == 1
    assert api.get("/health", auth=False).status == 200


def test_both_missing_kinds_are_named(api: ApiClient, database: Database) -> None:
    gone = datetime.now(UTC) - timedelta(minutes=5)
    writer(database, SCHEDULER, "scheduler@h:1", gone).beat()
    writer(database, WORKER, "worker@h:2", gone).beat(DEAD)
    reply = api.get("/health", auth=False)
    assert reply.error_code == "PROCESS_DOWN"
    assert reply.body["error"]["kinds"] == ["scheduler", "worker"]


def test_a_lean_invocation_is_live_until_the_next_one_is_overdue(
    api: ApiClient, database: Database
) -> None:
    """A scheduled invocation's last beat promises the next within the minute: live 65 s
    after it (the lean scheduler runs a few seconds a minute), not 75 s after."""
    now = datetime.now(UTC)
    beat = writer(database, SCHEDULER, "scheduler/delayed_promoter", now - timedelta(seconds=65))
    beat.beat(ALIVE, next_beat_in=SCHEDULE_PERIOD_SEC)
    assert live(api)["scheduler"] == 1
    assert api.get("/health", auth=False).status == 200
    late = writer(database, SCHEDULER, "scheduler/delayed_promoter", now - timedelta(seconds=75))
    late.beat(ALIVE, next_beat_in=SCHEDULE_PERIOD_SEC)
    assert live(api)["scheduler"] == 0
    assert api.get("/health", auth=False).error_code == "PROCESS_DOWN"


def test_the_housekeeper_keeps_the_newest_row_of_each_kind(
    api: ApiClient, database: Database
) -> None:
    """A worker stopped days ago is still PROCESS_DOWN: pruning old rows never forgets that
    a kind has run."""
    now = datetime.now(UTC)
    writer(database, WORKER, "worker@old:1", now - HEARTBEAT_TTL * 3).beat()
    writer(database, WORKER, "worker@old:2", now - HEARTBEAT_TTL * 2).beat()
    writer(database, SCHEDULER, "scheduler@old:3", now - HEARTBEAT_TTL * 2).beat()
    writer(database, SCHEDULER, "scheduler@now:4", now).beat()
    Housekeeper(database, retention_days=0, clock=lambda: now).run_once()
    rows = database.run("SELECT component FROM region_heartbeats ORDER BY component")
    assert [
        r["component"] for r in rows if "@" in r["component"] and "api" not in r["component"]
    ] == [
        "scheduler@now:4",
        "worker@old:2",
    ]
    assert api.get("/health", auth=False).body["error"]["kinds"] == ["worker"]


def test_the_liveness_read_is_bounded_by_the_index(database: Database) -> None:
    now = datetime.now(UTC)
    for n in range(30):  # a day of dead processes, and one live of each kind
        writer(database, WORKER, f"worker@gone:{n}", now - timedelta(hours=n + 1)).beat()
    writer(database, WORKER, "worker@h:1", now).beat()
    assert [(k.kind, k.live, k.has_run) for k in live_processes(database, now)] == [
        ("api", 0, False),
        ("scheduler", 0, False),
        ("worker", 1, True),
    ]
    used = indexes_used(database, "health_live_processes", now=now)
    assert used == {"idx_region_heartbeats_kind"}, used


def test_an_api_process_beats_when_it_serves(api: ApiClient, database: Database) -> None:
    assert api.get("/endpoints").status == 200
    rows = database.run("SELECT component FROM region_heartbeats WHERE kind = 'api'")
    assert [r["component"].split("@")[0] for r in rows] == ["api"]


class _Failing:
    component = "api@h:1"
    interval_sec = 5.0
    beats = 0

    def beat(self) -> None:
        self.beats += 1
        raise RuntimeError("the database is away")


def test_a_beat_when_serving_is_throttled_and_never_fails_the_request() -> None:
    now = [100.0]
    failing = _Failing()
    beat = BeatWhenServing(failing, monotonic=lambda: now[0])  # type: ignore[arg-type]
    beat.served()  # raised inside: logged, never raised
    beat.served()
    assert failing.beats == 1  # once per interval, failed or not
    now[0] += 5.0
    beat.served()
    assert failing.beats == 2


def test_health_live_reads_nothing(api: ApiClient) -> None:
    reply = api.get("/health/live", auth=False)
    assert (reply.status, reply.body) == (200, {"status": "ok"})
