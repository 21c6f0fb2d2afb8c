"""GET /health and GET /metrics say which background loop is down.

A real scheduler loop group runs a loop that fails on every iteration (a bug, not the
database) beside its heartbeat; the heartbeat carries the loop's state to the database,
and the API, reading it there, answers 503 LOOP_DOWN and te_loop_up 0 for that loop while
the others show 1. Rows of region_heartbeats that are not what the code writes (poison
rows, by SQL) must neither break /health nor stop the heartbeat loop."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from chalicelib.db.connection import Database
from chalicelib.health.heartbeat import DEAD, SCHEDULER, HeartbeatWriter
from chalicelib.runtime.loop import LoopSpec, Progress
from chalicelib.runtime.registry import LoopRegistry
from chalicelib.scheduler.loops import Scheduler
from tests.integration.test_lifecycle_plans import indexes_used
from tests.integration.test_metrics import scrape
from tests.support.api_client import ApiClient
from tests.support.waiting import wait_for

COMPONENT = "scheduler@test-host:1"


def doomed() -> Progress:
    raise RuntimeError("a row this loop cannot process, say")


def reported_down(database: Database) -> bool:
    rows = database.run("SELECT metadata FROM region_heartbeats WHERE component = :c", c=COMPONENT)
    states = rows[0]["metadata"].get("loop_states", {}) if rows else {}
    return bool(states.get("doomed", {}).get("down"))


class Running:
    """A loop group run in a thread until :meth:`stop` (then its DEAD beat is written)."""

    def __init__(self, group: Scheduler) -> None:
        self.group = group
        self._stop = threading.Event()
        self._thread = threading.Thread(target=group.run, args=(self._stop,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        assert not self._thread.is_alive()


@pytest.fixture
def failing_scheduler(database: Database) -> Iterator[Running]:
    """A loop group whose loop "doomed" always fails, beating every 50 ms, until stopped."""
    registry = LoopRegistry()
    heartbeat = HeartbeatWriter(
        database, kind=SCHEDULER, component=COMPONENT, registry=registry, interval_sec=0.05
    )
    loops = [
        LoopSpec(name="doomed", interval_sec=0.01, iteration=doomed),
        LoopSpec(name="fine", interval_sec=0.05, iteration=Progress),
        heartbeat.loop_spec(),
    ]
    running = Running(Scheduler(loops, heartbeat=heartbeat, final_status=DEAD, registry=registry))
    yield running
    running.stop()


def test_health_and_metrics_name_the_loop_that_is_down(
    api: ApiClient, database: Database, failing_scheduler: Running
) -> None:
    wait_for(lambda: reported_down(database), "the heartbeat to report the loop down", timeout=30)
    reply = api.get("/health", auth=False)
    assert reply.status == 503
    assert reply.error_code == "LOOP_DOWN"
    [loop] = reply.body["error"]["loops"]
    assert (loop["loop"], loop["phase"], loop["error"]) == ("doomed", "failing", "RuntimeError")
    assert loop["since"]
    assert "test-host" not in str(reply.body)  # no key needed: no host names
    metrics = scrape(api)
    up = {
        dict(labels)["loop"]: value
        for (name, labels), value in metrics.items()
        if name == "te_loop_up" and dict(labels)["component"] == COMPONENT
    }
    assert up == {"doomed": 0, "fine": 1, "heartbeat": 1}
    # The loop was never ended by its failures: it keeps trying, after its back-off.
    assert failing_scheduler.group.registry.state("doomed").failures >= 3


def test_a_stopped_process_has_no_loop_down_but_its_kind_is_missing(
    api: ApiClient, database: Database, failing_scheduler: Running
) -> None:
    wait_for(lambda: reported_down(database), "the heartbeat to report the loop down", timeout=30)
    assert api.get("/health", auth=False).error_code == "LOOP_DOWN"
    failing_scheduler.stop()  # a graceful stop writes DEAD: its loops are no longer down
    [row] = database.run("SELECT status FROM region_heartbeats WHERE component = :c", c=COMPONENT)
    assert row["status"] == "DEAD"
    # ... but it was the only scheduler: the deployment has none live now.
    reply = api.get("/health", auth=False)
    assert (reply.status, reply.error_code) == (503, "PROCESS_DOWN")
    assert reply.body["error"]["kinds"] == ["scheduler"]
    # Another scheduler beating makes the deployment whole again.
    HeartbeatWriter(database, kind=SCHEDULER, component="scheduler@test-host:2").beat()
    assert api.get("/health", auth=False).status == 200


#: Heartbeat rows the code never writes, each a different way of being wrong.
POISON_BEATS = {
    "scheduler@odd:1": "'\"not an object\"'",
    "scheduler@odd:2": "'[1, 2, 3]'",
    "scheduler@odd:3": "'{\"loop_states\": 5}'",
    "scheduler@odd:4": '\'{"loop_states": {"x": 3, "y": [true]}}\'',
    "scheduler@odd:5": '\'{"loop_states": {"z": {"down": "yes", "since": 7}}}\'',
    "scheduler@odd:6": "NULL",
}


def test_odd_heartbeat_rows_neither_break_health_nor_stop_the_heartbeat(
    api: ApiClient, database: Database
) -> None:
    for component, metadata in POISON_BEATS.items():
        database.execute(
            "INSERT INTO region_heartbeats (region, component, last_beat_at, status, metadata) "
            f"VALUES ('default', :c, now(), 'ALIVE', CAST({metadata} AS JSONB))",
            c=component,
        )
    # The heartbeat's own row, made odd too: the loop overwrites it on its next beat.
    database.execute(
        "INSERT INTO region_heartbeats (region, component, last_beat_at, status, metadata) "
        "VALUES ('default', :c, now(), 'WHATEVER', CAST('\"junk\"' AS JSONB))",
        c=COMPONENT,
    )
    registry = LoopRegistry()
    registry.running("fine")
    HeartbeatWriter(database, kind=SCHEDULER, component=COMPONENT, registry=registry).iteration()
    [own] = database.run(
        "SELECT status, metadata FROM region_heartbeats WHERE component = :c", c=COMPONENT
    )
    assert own["status"] == "ALIVE"
    assert own["metadata"]["loop_states"]["fine"] == {"phase": "running", "down": False}
    assert api.get("/health", auth=False).status == 200
    metrics = scrape(api)
    up = {
        (dict(labels)["component"], dict(labels)["loop"]): value
        for (name, labels), value in metrics.items()
        if name == "te_loop_up"
    }
    # The odd rows' entries that are objects are shown as best understood, never raised on.
    assert up == {(COMPONENT, "fine"): 1, ("scheduler@odd:5", "z"): 1}


def test_the_health_read_is_a_range_of_the_heartbeat_index(database: Database) -> None:
    # /health is called by load balancers: it must cost the live processes, not the table.
    now = datetime.now(UTC)
    used = indexes_used(database, "health_state", now=now, fresh_since=now)
    assert used == {"idx_region_heartbeats_beat", "idx_region_heartbeats_kind"}, used
