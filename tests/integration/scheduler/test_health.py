"""Health stubs against real PostgreSQL: they run, write and read, but decide nothing."""

from __future__ import annotations

from datetime import timedelta

from chalicelib.db.connection import Database
from chalicelib.domain.regions import ALL_REGIONS
from chalicelib.health.heartbeat import DEAD, SCHEDULER, HeartbeatWriter, instance_name
from chalicelib.health.region import RegionRefresher
from tests.support.clock import FakeClock
from tests.support.seed.scheduler import T0


def heartbeats(db: Database) -> list[dict[str, object]]:
    return db.run("SELECT * FROM region_heartbeats ORDER BY component")


def test_heartbeat_upserts_one_row_per_region_and_component(database: Database) -> None:
    clock = FakeClock(T0)
    writer = HeartbeatWriter(
        database, kind=SCHEDULER, component="scheduler@a:1", clock=clock, metadata={"x": 1}
    )
    writer.iteration()
    clock.advance(seconds=5)
    writer.iteration()
    other = HeartbeatWriter(database, kind=SCHEDULER, component="scheduler@b:2", clock=clock)
    other.beat()
    rows = heartbeats(database)
    assert [(r["region"], r["component"], r["status"]) for r in rows] == [
        ("default", "scheduler@a:1", "ALIVE"),
        ("default", "scheduler@b:2", "ALIVE"),
    ]
    assert rows[0]["last_beat_at"] == T0 + timedelta(seconds=5)
    assert rows[0]["metadata"] == {"x": 1}
    writer.beat(DEAD)
    assert heartbeats(database)[0]["status"] == "DEAD"


def test_heartbeat_loop_runs_every_five_seconds(database: Database) -> None:
    assert HeartbeatWriter(database, kind=SCHEDULER, component="c").loop_spec().interval_sec == 5.0
    assert instance_name("scheduler").startswith("scheduler@")


def test_region_refresher_reads_region_status_but_always_serves_default(
    database: Database,
) -> None:
    refresher = RegionRefresher(database)
    assert refresher.loop_spec().interval_sec == 10.0
    assert refresher.refresh() == ["default"]
    # Even a dead default region or a second region changes nothing while the stub is inactive.
    database.execute("UPDATE region_status SET alive = false, failed_at = now()")
    database.execute("INSERT INTO region_status (region, alive) VALUES ('ap-south-2', true)")
    assert refresher.refresh() == ["default"]
    assert refresher.iteration().count == 0
    assert refresher.active_regions() == ["default"]
    assert refresher.region_filter() == ALL_REGIONS
    assert refresher.region_filter().sql_clause() == "TRUE"
