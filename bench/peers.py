"""Throughput of the peers and the pgbench reference (workloads 2 and 3)."""

from __future__ import annotations

import os
from typing import Any

import pgbench_ref
from common import BENCH, BENCH_PY, progress, run_json
from pgserver import PgServer

#: PgQueuer: batched dequeue of 50 with at most 100 picked jobs (its docs require
#: max_concurrent_tasks >= 2 x batch_size); the fastest of the settings tried (10/25/50).
PGQ_BATCH, PGQ_MAX_CONCURRENT = 50, 100
#: Procrastinate: async task, concurrency 50 (the same in-flight bound as our worker).
PROC_CONCURRENCY = 50


def run_pgqueuer(server: PgServer, sink_url: str, n: int) -> dict[str, Any]:
    """Workload 2, PgQueuer; with its work per delivered job (bench/jobcost.py), measured
    in its process over its worker's run."""
    url = server.recreate("bench_pgqueuer")
    result = run_json(
        [
            str(BENCH_PY),
            str(BENCH / "peer_pgqueuer.py"),
            url,
            str(n),
            sink_url,
            str(PGQ_BATCH),
            str(PGQ_MAX_CONCURRENT),
        ],
        env=os.environ | {"BENCH_HARNESS_URL": server.harness_url("bench_pgqueuer")},
        timeout=600,
    )
    server.wait_idle("bench_pgqueuer")
    pj = result.get("per_job") or {}
    progress(
        f"PgQueuer: {result['done']} delivered, {result['per_s']:.0f}/s; per job "
        f"{_fmt(pj.get('statements'), '.3g')} statements, PostgreSQL {_fmt(pj.get('pg_cpu_us'))} "
        f"µs, WAL {_fmt(pj.get('wal_bytes'))} B, worker {_fmt(pj.get('worker_cpu_us'))} µs"
    )
    return result


def _fmt(value: float | None, spec: str = ".0f") -> str:
    return "n/a" if value is None else format(value, spec)


def run_procrastinate(server: PgServer, sink_url: str, n: int) -> dict[str, Any]:
    url = server.recreate("bench_procrastinate")
    result = run_json(
        [
            str(BENCH_PY),
            str(BENCH / "peer_procrastinate.py"),
            url,
            str(n),
            sink_url,
            str(PROC_CONCURRENCY),
        ],
        timeout=1800,
    )
    server.wait_idle("bench_procrastinate")
    progress(f"Procrastinate: {result['done']} delivered, {result['per_s']:.0f}/s")
    return result


def run_pgbench(server: PgServer, seconds: int) -> dict[str, Any]:
    return {"tps": pgbench_ref.run(server, seconds=seconds, clients=2), "seconds": seconds}
