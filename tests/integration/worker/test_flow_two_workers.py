"""Each operator control with two worker processes and a real HTTP target,
measured at the target: a pause, a 429 Retry-After hold, a rate limit of
100/s and max_concurrency 5.

The rate is a correctness check the issue demands (deliveries per second within +/-10 %
of the limit), so it is measured where it matters, at the target, over a steady window of
10 s, which keeps it robust on a loaded machine: a worker that falls behind may catch up
(the bucket holds up to `limit` tokens), it cannot get ahead. The window starts 3 s after
the first delivery: the bucket fills while the worker processes start, and its first
`limit` go out at once.
"""

from __future__ import annotations

import bisect
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from chalicelib.db.connection import Database
from chalicelib.services.endpoints import EndpointService
from tests.support.environment import ENCRYPTION_KEY, PROFILE
from tests.support.seed.worker import http_spec, retry_policy, seed, statuses
from tests.support.waiting import wait_for

#: The claim or the wake-up decides what these tests see: make test runs them again in
#: CockroachDB's configuration (test-cockroach).
pytestmark = pytest.mark.claim_path

ROOT = Path(__file__).resolve().parents[3]


class Meter:
    """A loopback HTTP target that records when each request arrived and how many were in
    flight at once; the first ``refusals`` requests get 429 with ``Retry-After``."""

    def __init__(self, *, delay: float = 0.0, refusals: int = 0, retry_after: str = "2") -> None:
        self.delay = delay
        self.refusals = refusals
        self.retry_after = retry_after
        self.arrivals: list[float] = []  # time.time() of each request
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/meter"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _enter(self) -> bool:
        with self._lock:
            self.arrivals.append(time.time())
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            refuse = len(self.arrivals) <= self.refusals
        return refuse

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        meter = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                refuse = meter._enter()
                try:
                    time.sleep(meter.delay)
                    self.send_response(429 if refuse else 200)
                    if refuse:
                        self.send_header("Retry-After", meter.retry_after)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                finally:
                    meter._leave()

            def log_message(self, format: str, *args: Any) -> None:
                return

        return Handler


@contextmanager
def two_workers(db_url: str) -> Iterator[list[subprocess.Popen[str]]]:
    """Two ``python -m chalicelib.worker`` processes on the test database, in the run's
    database configuration."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TE_")}
    env.update(
        TE_DATABASE_URL=db_url,
        TE_SECRET_ENCRYPTION_KEY=ENCRYPTION_KEY,
        TE_ALLOW_PRIVATE_TARGETS="true",
        TE_WORKER_POLL_INTERVAL_MS="50",
        TE_WORKER_SHUTDOWN_TIMEOUT_SEC="3",
        **PROFILE,  # make test-cockroach: the conditional claim, no LISTEN/NOTIFY
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "chalicelib.worker"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _started_together(db: Database, procs: list[subprocess.Popen[str]], endpoint: str) -> None:
    """Release ``endpoint`` (seeded paused) once both workers are up: each writes its
    heartbeat row before it polls. Released earlier, the first worker to start could take
    every slot of a short run before the second had imported (seen on a loaded machine),
    and "both workers took part" would fail for a reason the test is not about."""
    names = [f"worker@{socket.gethostname()}:{proc.pid}" for proc in procs]

    def both_up() -> bool:
        rows = db.run(
            "SELECT count(*) AS n FROM region_heartbeats WHERE component = ANY(CAST(:c AS TEXT[]))",
            c=names,
        )
        return int(rows[0]["n"]) == len(names)

    wait_for(both_up, "both workers' first heartbeat", timeout=60, interval=0.05)
    db.run("UPDATE endpoints SET paused_at = NULL WHERE name = :name", name=endpoint)


def _paused(db: Database, endpoint: str) -> None:
    db.run("UPDATE endpoints SET paused_at = now() WHERE name = :name", name=endpoint)


def _flow(db: Database, name: str, flow: dict[str, Any]) -> None:
    """Flow control as PUT /endpoints/{name} sets it (the definition and its bucket row)."""
    db.run(
        "UPDATE endpoints SET flow_control = CAST(:flow AS JSONB) WHERE name = :name",
        flow=json.dumps(flow),
        name=name,
    )
    db.run("INSERT INTO endpoint_flow (endpoint) VALUES (:name)", name=name)


def _workers_used(db: Database, endpoint: str) -> int:
    rows = db.run(
        "SELECT count(DISTINCT worker_id) AS n FROM executions WHERE endpoint = :e", e=endpoint
    )
    return int(rows[0]["n"])


def test_rate_limit_of_100_per_second_holds_at_the_target(database: Database, db_url: str) -> None:
    meter = Meter()
    seeded = seed(database, spec=http_spec(meter.url()), count=1600)
    _flow(database, seeded.endpoint, {"rate_limit": {"limit": 100, "period_ms": 1000}})
    _paused(database, seeded.endpoint)
    try:
        with two_workers(db_url) as procs:
            _started_together(database, procs, seeded.endpoint)
            wait_for(
                lambda: len(meter.arrivals),
                "1,450 deliveries",
                until=lambda n: n >= 1450,
                timeout=120,
                interval=0.05,
            )
    finally:
        meter.close()

    arrivals = sorted(meter.arrivals)
    # The bucket filled while the workers started (up to `limit` at once, by design):
    # the steady window starts 3 s after the first delivery and lasts 10 s.
    start = arrivals[0] + 3.0
    window = 10.0
    assert arrivals[-1] >= start + window
    first = bisect.bisect_left(arrivals, start)
    delivered = bisect.bisect_left(arrivals, start + window) - first
    rate = delivered / window
    per_second = [
        bisect.bisect_left(arrivals, start + s + 1) - bisect.bisect_left(arrivals, start + s)
        for s in range(int(window))
    ]
    print(f"rate at the target: {rate:.1f}/s over {window:.0f} s; per second: {per_second}")
    assert 90 <= rate <= 110, (rate, per_second)
    assert _workers_used(database, seeded.endpoint) == 2


def test_max_concurrency_5_is_never_exceeded_at_the_target(database: Database, db_url: str) -> None:
    meter = Meter(delay=0.15)
    # Each worker delivers at most 3 of the endpoint's executions at once (max_concurrent),
    # so reaching the cluster-wide 5 takes both: the worker whose deliveries end first no
    # longer takes every freed place itself.
    spec = http_spec(meter.url(), max_concurrent=3)
    seeded = seed(database, spec=spec, count=80)
    _flow(database, seeded.endpoint, {"max_concurrency": 5})
    _paused(database, seeded.endpoint)
    try:
        with two_workers(db_url) as procs:
            _started_together(database, procs, seeded.endpoint)
            wait_for(
                lambda: statuses(database, seeded.execution_ids),
                "80 deliveries",
                until=lambda counts: counts == {"SUCCESS": 80},
                timeout=90,
                interval=0.05,
            )
    finally:
        meter.close()

    print(f"max in flight at the target: {meter.max_in_flight}")
    assert 2 <= meter.max_in_flight <= 5
    assert len(meter.arrivals) == 80
    assert _workers_used(database, seeded.endpoint) == 2


def test_a_pause_stops_both_workers_and_a_resume_restarts_them(
    database: Database, db_url: str
) -> None:
    meter = Meter(delay=0.2)
    # Two deliveries at a time per worker: 200 executions last about ten seconds.
    seeded = seed(database, spec=http_spec(meter.url(), max_concurrent=2), count=200)
    service = EndpointService(database)
    try:
        with two_workers(db_url):
            wait_for(
                lambda: len(meter.arrivals),
                "the first deliveries",
                until=lambda n: n >= 10,
                timeout=60,
                interval=0.05,
            )
            service.pause(seeded.endpoint)
            # The pause's commit, on the database's clock. `paused_at` is the pause
            # transaction's start: a claim that began before the pause committed saw the
            # endpoint unpaused and may carry a later `started_at` (its own start) legitimately.
            [committed] = database.run("SELECT clock_timestamp() AS at")
            # What was in flight when the pause came ends; nothing new starts.
            wait_for(
                lambda: statuses(database, seeded.execution_ids),
                "the deliveries in flight to end",
                until=lambda counts: "RUNNING" not in counts,
                timeout=30,
                interval=0.05,
            )
            settled = len(meter.arrivals)
            time.sleep(1.0)  # the scenario: 20 poll intervals (50 ms) of both workers, paused
            assert len(meter.arrivals) == settled  # nothing sent while paused
            [after] = database.run(
                "SELECT count(*) AS n FROM executions WHERE endpoint = :e AND started_at > :at",
                e=seeded.endpoint,
                at=committed["at"],
            )
            assert after["n"] == 0  # nothing claimed after the pause committed
            counts = statuses(database, seeded.execution_ids)
            # Every request the target saw was an execution claimed before the pause.
            assert settled == counts.get("SUCCESS", 0)
            assert counts.get("QUEUED", 0) > 0

            service.resume(seeded.endpoint)
            wait_for(
                lambda: statuses(database, seeded.execution_ids),
                "every delivery after the resume",
                until=lambda counts: counts == {"SUCCESS": 200},
                timeout=90,
                interval=0.05,
            )
    finally:
        meter.close()
    assert _workers_used(database, seeded.endpoint) == 2


def test_a_429_with_retry_after_holds_the_endpoint_on_both_workers(
    database: Database, db_url: str
) -> None:
    meter = Meter(refusals=1, retry_after="2")
    seeded = seed(
        database,
        spec=http_spec(meter.url()),
        policy=retry_policy(max_attempts=2, initial_delay_ms=10, max_delay_ms=10),
        count=6,
    )
    # One at a time across both workers, so the hold, not a send in flight, decides when
    # the next request goes out.
    _flow(database, seeded.endpoint, {"max_concurrency": 1})
    try:
        with two_workers(db_url):
            wait_for(
                lambda: statuses(database, seeded.execution_ids),
                "every delivery",
                until=lambda counts: counts == {"SUCCESS": 6},
                timeout=60,
                interval=0.05,
            )
    finally:
        meter.close()

    arrivals = sorted(meter.arrivals)
    assert len(arrivals) == 7  # one refused, then six delivered (the refused one retried)
    [hold] = database.run(
        "SELECT e.held_until, min(a.completed_at) AS refused_at FROM endpoints e "
        "JOIN executions x ON x.endpoint = e.name JOIN attempts a USING (execution_id) "
        "WHERE e.name = :e AND a.status <> 'SUCCESS' GROUP BY e.held_until",
        e=seeded.endpoint,
    )
    # The refusal held the endpoint for its Retry-After (as recorded) ...
    assert hold["held_until"] >= hold["refused_at"] + timedelta(seconds=2)
    # ... and the whole endpoint waited for it: the next request came after the hold.
    assert arrivals[0] < hold["held_until"].timestamp() <= arrivals[1]
