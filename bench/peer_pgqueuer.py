"""Peer: PgQueuer (asyncio + asyncpg) delivering N POSTs to the sink, one worker process.

Usage: peer_pgqueuer.py URL N SINK_URL [BATCH_SIZE] [MAX_CONCURRENT]. Prints one JSON line.
       BENCH_HARNESS_URL (optional): the same database as the harness's role, for the
       statement counts and the server CPU (bench/jobcost.py); without it, they are left out.
       peer_pgqueuer.py latency URL SINK_URL SECONDS: one job every 20 ms while a queue
       manager runs; prints each job's enqueue time (workload 4's PgQueuer row).
       peer_pgqueuer.py enqueue URL N: only enqueueing: the batch rate (lists of 1,000 from
       two concurrent connections), next to our POST /jobs/batch, and single-job enqueue
       calls (p50 sequentially, jobs/s from 8 connections), next to our POST /jobs
       (bench/batches.py).

Settings follow PgQueuer's docs for throughput: batched dequeue (``batch_size``), batched
status acknowledgements (its JobStatusLogBuffer), LISTEN/NOTIFY, uvloop, one asyncpg
connection for the queue manager. ``mode=drain`` makes the worker exit once the queue is
empty, so the run has a natural end. The rate is measured from the database: first
'picked' to last 'successful' in pgqueuer_log (the same first-claim-to-last-finalize
window our worker is measured on), with the in-process wall clock as a cross-check.

Work per delivered job (bench/jobcost.py), over the call of ``work`` (from the queue
manager's connect to its exit in drain mode): client statements from pg_stat_statements
(the harness's role left out), PostgreSQL CPU from /proc, and this process's CPU
(``getrusage``, all threads): the worker's, without the interpreter start, the imports, the
seeding and the harness's own queries.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sys
import time
from datetime import timedelta

import aiohttp
import asyncpg
import jobcost
import uvloop
from pgqueuer import QueueManager
from pgqueuer.db import AsyncpgDriver
from pgqueuer.models import Job
from pgqueuer.queries import Queries
from pgqueuer.types import QueueExecutionMode


async def seed(url: str, n: int) -> None:
    conn = await asyncpg.connect(url)
    try:
        queries = Queries(AsyncpgDriver(conn))
        await queries.install()
        for start in range(0, n, 1000):
            size = min(1000, n - start)
            await queries.enqueue(
                ["deliver"] * size,
                [f"pgq_{i}".encode() for i in range(start, start + size)],
                [0] * size,
            )
    finally:
        await conn.close()


async def work(url: str, sink: str, batch_size: int, max_concurrent: int) -> dict[str, float]:
    conn = await asyncpg.connect(url)
    qm = QueueManager(Queries(AsyncpgDriver(conn)))
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=max_concurrent))
    marks: dict[str, float] = {}

    @qm.entrypoint("deliver")
    async def deliver(job: Job) -> None:
        marks.setdefault("first", time.time())
        ident = (job.payload or b"").decode()
        async with session.post(
            sink, json={"id": ident}, headers={"X-Task-Executor-Execution-Id": ident}
        ) as resp:
            if resp.status != 200:
                raise RuntimeError(f"sink answered {resp.status}")
            await resp.read()

    await qm.run(
        batch_size=batch_size,
        max_concurrent_tasks=max_concurrent,
        mode=QueueExecutionMode.drain,
        dequeue_timeout=timedelta(seconds=1),
    )
    marks["end"] = time.time()
    await session.close()
    await conn.close()
    return marks


async def measure(url: str) -> dict[str, float | int]:
    conn = await asyncpg.connect(url)
    try:
        row = await conn.fetchrow(
            "SELECT min(created) FILTER (WHERE status = 'picked') AS first_pick,"
            " max(created) FILTER (WHERE status = 'successful') AS last_done,"
            " count(*) FILTER (WHERE status = 'successful') AS done FROM pgqueuer_log"
        )
    finally:
        await conn.close()
    window = (row["last_done"] - row["first_pick"]).total_seconds()
    return {"done": int(row["done"]), "db_window_s": window}


async def counters(url: str) -> tuple[int, int]:
    """(WAL position, committed transactions) of this database, after stats are flushed."""
    await asyncio.sleep(1.2)
    conn = await asyncpg.connect(url)
    try:
        row = await conn.fetchrow(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint AS wal, xact_commit"
            " FROM pg_stat_database WHERE datname = current_database()"
        )
    finally:
        await conn.close()
    return int(row["wal"]), int(row["xact_commit"])


async def main() -> None:
    url, n, sink = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    batch_size = int(sys.argv[4]) if len(sys.argv) > 4 else 25
    max_concurrent = int(sys.argv[5]) if len(sys.argv) > 5 else 50
    harness_url = os.environ.get("BENCH_HARNESS_URL")
    await seed(url, n)
    before = await counters(harness_url or url)
    probe = await asyncpg.connect(harness_url) if harness_url else None
    cost: dict[str, object] = {}
    if probe is not None:
        window = jobcost.CpuWindow(await probe.fetchval(jobcost.BACKEND_PID_SQL))
        dealloc0 = await probe.fetchval(jobcost.DEALLOC_SQL)
        await probe.execute(jobcost.RESET_SQL)
        window.start()
    cpu0 = _process_cpu_s()
    marks = await work(url, sink, batch_size, max_concurrent)
    worker_cpu = _process_cpu_s() - cpu0
    if probe is not None:
        cost.update(window.stop())
        rows = await probe.fetch(jobcost.STATEMENTS_SQL)
        dealloc = await probe.fetchval(jobcost.DEALLOC_SQL) - dealloc0
        cost.update(jobcost.statements([(r["query"], r["calls"]) for r in rows], dealloc))
        await probe.close()
    after = await counters(harness_url or url)
    db = await measure(harness_url or url)
    wall = marks["end"] - marks["first"]
    result = {
        "system": "pgqueuer",
        "n": n,
        "done": db["done"],
        "batch_size": batch_size,
        "max_concurrent": max_concurrent,
        "db_window_s": db["db_window_s"],
        "wall_s": wall,
        "per_s": db["done"] / db["db_window_s"] if db["db_window_s"] > 0 else None,
        "per_s_wall": db["done"] / wall if wall > 0 else None,
        "commits_per_delivery": (after[1] - before[1]) / max(1, db["done"]),
        "wal_bytes_per_delivery": (after[0] - before[0]) / max(1, db["done"]),
        "worker_cpu_window_s": worker_cpu,
        **cost,
    }
    result["per_job"] = jobcost.per_job(result, db["done"])
    print(json.dumps(result))


def _process_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def enqueue_rate(url: str, n: int, clients: int = 2) -> None:
    setup = await asyncpg.connect(url)
    try:
        await Queries(AsyncpgDriver(setup)).install()
    finally:
        await setup.close()
    conns = [await asyncpg.connect(url) for _ in range(clients)]

    async def client(c: int) -> None:
        queries = Queries(AsyncpgDriver(conns[c]))
        for start in range(c * 1000, n, clients * 1000):
            size = min(1000, n - start)
            await queries.enqueue(
                ["deliver"] * size,
                [f"pgq_{i}".encode() for i in range(start, start + size)],
                [0] * size,
            )

    started = time.perf_counter()
    try:
        await asyncio.gather(*(client(c) for c in range(clients)))
    finally:
        elapsed = time.perf_counter() - started
        for conn in conns:
            await conn.close()
    single = await single_enqueues(url, min(n, 2000))
    print(
        json.dumps(
            {
                "system": "pgqueuer",
                "jobs": n,
                "clients": clients,
                "per_s": n / elapsed,
                **single,
            }
        )
    )


async def single_enqueues(url: str, n: int) -> dict[str, float]:
    """One job per ``enqueue`` call: sequential on one connection (p50 of the call), then
    from 8 connections at once (jobs/s): what POST /jobs is compared with."""
    conns = [await asyncpg.connect(url) for _ in range(8)]
    try:
        queries = [Queries(AsyncpgDriver(c)) for c in conns]
        times = []
        for i in range(n):
            start = time.perf_counter()
            await queries[0].enqueue("deliver", f"one_{i}".encode(), 0)
            times.append(time.perf_counter() - start)
        times.sort()

        async def client(c: int) -> None:
            for i in range(c, n, 8):
                await queries[c].enqueue("deliver", f"eight_{i}".encode(), 0)

        start = time.perf_counter()
        await asyncio.gather(*(client(c) for c in range(8)))
        eight = n / (time.perf_counter() - start)
    finally:
        for conn in conns:
            await conn.close()
    return {"single_p50_ms": 1000 * times[len(times) // 2], "single_8_clients_per_s": eight}


async def latency(url: str, sink: str, seconds: float, interval_s: float = 0.02) -> None:
    """Enqueue one job every ``interval_s`` for ``seconds`` while one queue manager runs
    (continuous mode, LISTEN/NOTIFY, the throughput run's batch and concurrency); the
    handler POSTs to the sink with the job's id in the execution-id header. Prints the wall
    time before each enqueue call, by id: joined with the sink's receive times, enqueue ->
    handler's request, next to our POST /jobs -> target (workload 4)."""
    setup = await asyncpg.connect(url)
    try:
        await Queries(AsyncpgDriver(setup)).install()
    finally:
        await setup.close()
    conn = await asyncpg.connect(url)
    producer_conn = await asyncpg.connect(url)
    qm = QueueManager(Queries(AsyncpgDriver(conn)))
    session = aiohttp.ClientSession()

    @qm.entrypoint("deliver")
    async def deliver(job: Job) -> None:
        ident = (job.payload or b"").decode()
        async with session.post(
            sink, json={"id": ident}, headers={"X-Task-Executor-Execution-Id": ident}
        ) as resp:
            await resp.read()

    sent: dict[str, float] = {}

    async def produce() -> None:
        queries = Queries(AsyncpgDriver(producer_conn))
        await asyncio.sleep(2)  # the manager is listening
        start = time.monotonic()
        for i in range(int(seconds / interval_s)):
            delay = start + i * interval_s - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            ident = f"pgq_lat_{i}"
            sent[ident] = time.time()
            await queries.enqueue("deliver", ident.encode(), 0)
        await asyncio.sleep(2)  # the last ones delivered
        qm.shutdown.set()

    await asyncio.gather(
        qm.run(batch_size=PGQ_BATCH, max_concurrent_tasks=PGQ_MAX_CONCURRENT), produce()
    )
    await session.close()
    await conn.close()
    await producer_conn.close()
    print(json.dumps({"system": "pgqueuer", "sent": sent}))


#: The throughput run's settings (bench/peers.py passes the same).
PGQ_BATCH = 50
PGQ_MAX_CONCURRENT = 100


if __name__ == "__main__":
    if sys.argv[1] == "enqueue":
        uvloop.run(enqueue_rate(sys.argv[2], int(sys.argv[3])))
    elif sys.argv[1] == "latency":
        uvloop.run(latency(sys.argv[2], sys.argv[3], float(sys.argv[4])))
    else:
        uvloop.run(main())
