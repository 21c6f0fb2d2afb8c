"""Workload 12: job creation in batches.

Ours: ``POST /jobs/batch`` over HTTP, 1,000-item batches, 2 concurrent clients, against the
API process on the durable PostgreSQL at SERIALIZABLE (the same API process as workload 8).
Next to it, in the same run and on the same server: PgQueuer's batch enqueue
(``Queries.enqueue`` with lists of 1,000, two concurrent connections) and Procrastinate's
(``batch_defer_async`` of 1,000, two concurrent callers), the peer figures the issue
compares with; all report jobs/s over the whole run, the median of ``rounds`` runs (3 in a
full run), the systems taking turns. The peers' runs also time one job per
enqueue call (p50), next to POST /jobs's sequential p50 (workload 8).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import ours
from common import BENCH, BENCH_PY, progress, run_json
from pgserver import PgServer
from sink import Sink

BATCH = 1000
CLIENTS = 2


def _items(batch: int, size: int) -> list[dict[str, Any]]:
    return [
        {
            "endpoint": ours.ENDPOINT,
            "trigger": "IMMEDIATE",
            "idempotency_key": f"b{batch}-{i}",
            "input": {"n": i},
        }
        for i in range(size)
    ]


def ours_batch_rate(server: PgServer, sink: Sink, batches: int) -> dict[str, Any]:
    """POST /jobs/batch: ``batches`` batches of 1,000 over 2 keep-alive clients."""
    url = ours.prepare_db(server, "bench_batch")
    procs = ours.Procs()
    try:
        api = ours.start_api(procs, url, stack=False)
        ours.create_endpoint(api, sink.url)
        clients = [ours.Api(api.port) for _ in range(CLIENTS)]
        bodies = [{"jobs": _items(b, BATCH)} for b in range(batches)]
        seconds: list[float] = []

        def post(client: ours.Api, mine: list[dict[str, Any]]) -> None:
            for body in mine:
                start = time.perf_counter()
                status, reply = client.call("POST", "/jobs/batch", body)
                seconds.append(time.perf_counter() - start)
                created = sum(1 for i in reply["items"] if i["status"] == 201)
                if status != 200 or created != BATCH:
                    raise RuntimeError(f"POST /jobs/batch answered {status}, {created} created")

        start = time.perf_counter()
        with ThreadPoolExecutor(CLIENTS) as pool:
            futures = [pool.submit(post, clients[c], bodies[c::CLIENTS]) for c in range(CLIENTS)]
            for future in futures:
                future.result()
        elapsed = time.perf_counter() - start
    finally:
        procs.stop()
    seconds.sort()
    return {
        "jobs": batches * BATCH,
        "per_s": batches * BATCH / elapsed,
        "request_p50_ms": 1000 * seconds[len(seconds) // 2],
        "request_max_ms": 1000 * seconds[-1],
    }


def pgqueuer_batch_rate(server: PgServer, batches: int) -> dict[str, Any]:
    """PgQueuer's ``enqueue`` of 1,000-job lists from 2 concurrent connections."""
    url = server.recreate("bench_pgq_batch")
    return run_json(
        [str(BENCH_PY), str(BENCH / "peer_pgqueuer.py"), "enqueue", url, str(batches * BATCH)],
        timeout=600,
    )


def procrastinate_batch_rate(server: PgServer, batches: int) -> dict[str, Any]:
    """Procrastinate's ``batch_defer_async`` of 1,000 from 2 concurrent callers."""
    url = server.recreate("bench_proc_batch")
    return run_json(
        [str(BENCH_PY), str(BENCH / "peer_procrastinate.py"), "enqueue", url, str(batches * BATCH)],
        timeout=600,
    )


def _peer(measure: Any, server: PgServer, batches: int) -> dict[str, Any]:
    try:
        return dict(measure(server, batches))
    except Exception as exc:  # a missing peer is recorded, never fatal
        return {"error": str(exc)}


def _median_round(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median rate (the others' rates kept beside it)."""
    rated = sorted((r for r in runs if r.get("per_s")), key=lambda r: r["per_s"])
    if not rated:
        return runs[0]
    return {**rated[len(rated) // 2], "rounds_per_s": [r.get("per_s") for r in runs]}


def batch_rates(server: PgServer, sink: Sink, batches: int, rounds: int = 1) -> dict[str, Any]:
    """Each system ``rounds`` times, in turn; each figure is the median round's."""
    runs: dict[str, list[dict[str, Any]]] = {"ours": [], "pgqueuer": [], "procrastinate": []}
    for _ in range(rounds):
        runs["ours"].append(ours_batch_rate(server, sink, batches))
        runs["pgqueuer"].append(_peer(pgqueuer_batch_rate, server, batches))
        runs["procrastinate"].append(_peer(procrastinate_batch_rate, server, batches))
    ours_rate, pgq, proc = (_median_round(runs[k]) for k in ("ours", "pgqueuer", "procrastinate"))
    progress(
        f"batch creation: ours POST /jobs/batch {ours_rate['per_s']:.0f} jobs/s "
        f"(1,000 per request, {CLIENTS} clients, request p50 {ours_rate['request_p50_ms']:.0f} "
        f"ms); PgQueuer enqueue {pgq.get('per_s', 0):.0f}, Procrastinate batch_defer "
        f"{proc.get('per_s', 0):.0f} jobs/s; single enqueue p50: PgQueuer "
        f"{pgq.get('single_p50_ms', 0):.2f} ms, Procrastinate {proc.get('single_p50_ms', 0):.2f} ms"
    )
    return {
        "batch": BATCH,
        "clients": CLIENTS,
        "rounds": rounds,
        "ours": ours_rate,
        "pgqueuer": pgq,
        "procrastinate": proc,
    }


if __name__ == "__main__":  # python bench/batches.py [BATCHES]: this workload alone
    import sys

    count = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    pg, out = PgServer(), Sink()
    pg.start()
    out.start()
    try:
        print(batch_rates(pg, out, count))
    finally:
        out.stop()
        pg.stop()
