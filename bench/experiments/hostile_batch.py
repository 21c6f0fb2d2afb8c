"""Hostile batches against everyone else: do they slow other requests and deliveries?

A payload spec of 22 nested ``anyOf`` levels (two ``$ref``s each to the next) makes every
input that fails at the leaf cost 2**22 validation steps. One client sends batches of 1,000
such items back to back; meanwhile another client sends ordinary IMMEDIATE jobs one at a
time to an nginx sink and long-polls each to SUCCESS, and a third reads ``GET /health``.
The same two measuring clients run first without the hostile one (baseline). Reported:
medians and p95 of ``POST /jobs``, of ``POST /jobs`` -> SUCCESS and of ``GET /health``, in
both phases and their ratio; how long each hostile batch took to answer; and how many
the longest transaction open meanwhile was (pg_stat_activity, sampled every 20 ms): a
validation inside a transaction would show as one of half a second (any transaction of the
process is slowed by sharing the CPU with the validation, so not zero either).

The stack is ``python -m chalicelib.local`` (API, worker and scheduler in one process, as
``make run``). Usage (bench venv): python bench/experiments/hostile_batch.py [SECONDS]
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ours
from common import percentile, progress
from pgserver import PgServer
from sink import Sink

LEVELS = 22
DATABASE = "hostile"


def exponential_schema() -> dict[str, Any]:
    defs: dict[str, Any] = {
        f"l{i}": {"anyOf": [{"$ref": f"#/$defs/l{i + 1}"}, {"$ref": f"#/$defs/l{i + 1}"}]}
        for i in range(LEVELS)
    }
    defs[f"l{LEVELS}"] = {"type": "object", "required": ["needle"]}
    return {"$defs": defs, "$ref": "#/$defs/l0"}


def _stats(values: list[float]) -> dict[str, Any]:
    ms = sorted(v * 1000 for v in values)
    return {"n": len(ms), "p50_ms": percentile(ms, 50), "p95_ms": percentile(ms, 95)}


class Measure:
    """The ordinary clients: one job at a time to SUCCESS, and /health."""

    def __init__(self, port: int) -> None:
        self.jobs, self.health = ours.Api(port), ours.Api(port)
        self.post: list[float] = []
        self.e2e: list[float] = []
        self.health_s: list[float] = []
        self.n = 0

    def run(self, stop: threading.Event) -> None:
        threading.Thread(target=self._health, args=(stop,), daemon=True).start()
        while not stop.is_set():
            self.n += 1
            started = time.perf_counter()
            reply = ours.post_job(
                self.jobs,
                {
                    "endpoint": ours.ENDPOINT,
                    "trigger": "IMMEDIATE",
                    "idempotency_key": f"m-{time.time_ns()}-{self.n}",
                    "input": {"n": self.n},
                },
            )
            self.post.append(time.perf_counter() - started)
            execution = reply["execution"]["execution_id"]
            status, body = self._wait(execution)
            if status == 200 and body["status"] == "SUCCESS":
                self.e2e.append(time.perf_counter() - started)

    def _wait(self, execution: str) -> tuple[int, Any]:
        for _ in range(50):
            status, body = self.jobs.call("GET", f"/executions/{execution}")
            if status != 200 or body["status"] in ("SUCCESS", "FAILED"):
                return status, body
            time.sleep(0.002)
        return status, body

    def _health(self, stop: threading.Event) -> None:
        while not stop.is_set():
            started = time.perf_counter()
            self.health.call("GET", "/health")
            self.health_s.append(time.perf_counter() - started)
            time.sleep(0.05)

    def report(self) -> dict[str, Any]:
        return {
            "post_jobs": _stats(self.post),
            "post_to_success": _stats(self.e2e),
            "health": _stats(self.health_s),
        }


def hostile(port: int, stop: threading.Event, took: list[float]) -> None:
    api = ours.Api(port)
    batch = 0
    while not stop.is_set():
        batch += 1
        items = [
            {
                "endpoint": "slow",
                "trigger": "IMMEDIATE",
                "idempotency_key": f"h-{batch}-{i}",
                "input": {"hay": i},
            }
            for i in range(1000)
        ]
        started = time.perf_counter()
        status, body = api.call("POST", "/jobs/batch", {"jobs": items})
        took.append(time.perf_counter() - started)
        assert status == 200, (status, json.dumps(body)[:300])


def in_transaction(stop: threading.Event, seen: list[float], server: PgServer) -> None:
    conn = server.connect(DATABASE)
    conn.autocommit = True
    while not stop.is_set():
        row = conn.execute(
            "SELECT COALESCE(max(EXTRACT(EPOCH FROM now() - xact_start)), 0) "
            "FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND xact_start IS NOT NULL"
        ).fetchone()
        seen.append(float(row[0]))
        time.sleep(0.02)


def phase(port: int, seconds: float, *, hostile_on: bool, server: PgServer) -> Any:
    stop = threading.Event()
    measure = Measure(port)
    took: list[float] = []
    seen: list[float] = []
    threads = [threading.Thread(target=measure.run, args=(stop,))]
    if hostile_on:
        threads.append(threading.Thread(target=hostile, args=(port, stop, took)))
        threads.append(threading.Thread(target=in_transaction, args=(stop, seen, server)))
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    result = measure.report()
    if hostile_on:
        result["hostile_batch"] = _stats(took)
        result["longest_open_transaction_ms"] = round(max(seen, default=0.0) * 1000, 1)
    return result


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 20.0
    server, sink, procs = PgServer(), Sink(), ours.Procs()
    server.start()
    sink.start()
    try:
        url = ours.prepare_db(server, DATABASE)
        api = ours.start_api(procs, url, stack=True)
        ours.create_endpoint(api, sink.url)
        status, body = api.call(
            "POST", "/payload-specs", {"name": "slow", "schema": exponential_schema()}
        )
        assert status == 201, body
        spec = ours.endpoint_spec(sink.url)
        status, body = api.call(
            "POST",
            "/endpoints",
            {"name": "slow", "type": "HTTP", "spec": spec, "payload_spec": "slow"},
        )
        assert status == 201, body
        progress(f"baseline for {seconds:g} s")
        base = phase(api.port, seconds, hostile_on=False, server=server)
        progress(f"with hostile batches for {seconds:g} s")
        loaded = phase(api.port, seconds, hostile_on=True, server=server)
        ratios = {
            name: round(loaded[name]["p50_ms"] / base[name]["p50_ms"], 2)
            for name in ("post_jobs", "post_to_success", "health")
        }
        print(json.dumps({"baseline": base, "hostile": loaded, "p50_ratio": ratios}, indent=2))
    finally:
        procs.stop()
        sink.stop()
        server.stop()


if __name__ == "__main__":
    main()
