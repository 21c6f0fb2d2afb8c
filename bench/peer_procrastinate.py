"""Peer: Procrastinate (psycopg 3) delivering N POSTs to the sink, one worker process.

Usage: peer_procrastinate.py URL N SINK_URL [CONCURRENCY]. Prints one JSON line.
       peer_procrastinate.py enqueue URL N: only enqueueing (batches of 1,000 from two
       concurrent callers, then single defers), next to ours (bench/batches.py).

Settings follow Procrastinate's docs: an async task on the PsycopgConnector (psycopg_pool),
``concurrency`` for I/O-bound async tasks (its howto on concurrency), LISTEN/NOTIFY on,
``wait=False`` so the worker exits when the queue is empty, uvloop. The rate is measured
from procrastinate_events: first 'started' to last 'succeeded'.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

import aiohttp
import procrastinate
import psycopg
import uvloop

STATE: dict[str, object] = {}


def build_app(url: str, pool_size: int) -> procrastinate.App:
    connector = procrastinate.PsycopgConnector(conninfo=url, min_size=2, max_size=pool_size)
    app = procrastinate.App(connector=connector)

    @app.task(name="deliver", queue="deliver")
    async def deliver(ident: str) -> None:
        STATE.setdefault("first", time.time())
        session = STATE["session"]
        async with session.post(  # type: ignore[attr-defined]
            STATE["sink"], json={"id": ident}, headers={"X-Task-Executor-Execution-Id": ident}
        ) as resp:
            if resp.status != 200:
                raise RuntimeError(f"sink answered {resp.status}")
            await resp.read()

    return app


def counters(url: str) -> tuple[int, int]:
    """(WAL position, committed transactions) of this database, after stats are flushed."""
    time.sleep(1.2)
    with psycopg.connect(url) as conn:
        wal, commits = conn.execute(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, xact_commit"
            " FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()  # type: ignore[misc]
    return int(wal), int(commits)


async def main() -> None:
    url, n, sink = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    concurrency = int(sys.argv[4]) if len(sys.argv) > 4 else 50
    app = build_app(url, pool_size=concurrency + 5)
    STATE["sink"] = sink
    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        task = app.tasks["deliver"]
        for start in range(0, n, 1000):
            await task.batch_defer_async(
                *({"ident": f"proc_{i}"} for i in range(start, min(n, start + 1000)))
            )
        before = counters(url)
        STATE["session"] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency))
        await app.run_worker_async(
            queues=["deliver"], concurrency=concurrency, wait=False, listen_notify=True
        )
        end = time.time()
        await STATE["session"].close()  # type: ignore[attr-defined]
    after = counters(url)
    with psycopg.connect(url) as conn:
        first, last, done = conn.execute(
            "SELECT min(at) FILTER (WHERE type = 'started'), max(at) FILTER (WHERE type ="
            " 'succeeded'), count(*) FILTER (WHERE type = 'succeeded') FROM procrastinate_events"
        ).fetchone()  # type: ignore[misc]
    window = (last - first).total_seconds()
    wall = end - float(STATE["first"])  # type: ignore[arg-type]
    print(
        json.dumps(
            {
                "system": "procrastinate",
                "n": n,
                "done": done,
                "concurrency": concurrency,
                "db_window_s": window,
                "wall_s": wall,
                "per_s": done / window if window > 0 else None,
                "per_s_wall": done / wall if wall > 0 else None,
                "commits_per_delivery": (after[1] - before[1]) / max(1, done),
                "wal_bytes_per_delivery": (after[0] - before[0]) / max(1, done),
            }
        )
    )


async def enqueue_rate(url: str, n: int, clients: int = 2) -> None:
    """Only enqueueing: ``batch_defer_async`` of 1,000 jobs from ``clients`` concurrent
    callers (jobs/s), then one job per ``defer_async`` call sequentially (p50)."""
    app = build_app(url, pool_size=clients + 2)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        task = app.tasks["deliver"]

        async def client(c: int) -> None:
            for start in range(c * 1000, n, clients * 1000):
                await task.batch_defer_async(
                    *({"ident": f"proc_{i}"} for i in range(start, min(n, start + 1000)))
                )

        started = time.perf_counter()
        await asyncio.gather(*(client(c) for c in range(clients)))
        per_s = n / (time.perf_counter() - started)
        times = []
        for i in range(min(n, 2000)):
            start = time.perf_counter()
            await task.defer_async(ident=f"one_{i}")
            times.append(time.perf_counter() - start)
    times.sort()
    result = {
        "system": "procrastinate",
        "jobs": n,
        "clients": clients,
        "per_s": per_s,
        "single_p50_ms": 1000 * times[len(times) // 2],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    if sys.argv[1] == "enqueue":
        uvloop.run(enqueue_rate(sys.argv[2], int(sys.argv[3])))
    else:
        uvloop.run(main())
