"""POST /jobs -> target, split in two: the API call, then the client's reply -> the sink.

Workload 4's topology (the API server alone, ``ours_inproc.py serve-api``, and a separate
worker woken by NOTIFY, on the same durable PostgreSQL and nginx sink as ``make bench``):
one IMMEDIATE job every ``--interval`` ms from one keep-alive client. For each job it takes
the wall time before the POST, when the reply was read, and when the sink received the
delivery, and prints p50/p90/p99 of the API call, of reply -> sink (negative when the
delivery beat the reply) and of the whole, which is workload 4's figure. ``--no-worker``
times the API call alone; ``--interval 0`` sends back to back (what a busy API costs, next
to an idle one's).

Usage (bench venv): python bench/experiments/latency_split.py [N] [--interval MS] [--no-worker]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ours
import workloads
from common import percentile, progress
from pgserver import PgServer
from sink import Sink


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", type=int, nargs="?", default=750)
    parser.add_argument("--interval", type=float, default=20.0, metavar="MS")
    parser.add_argument("--no-worker", action="store_true")
    args = parser.parse_args()
    server, sink = PgServer(), Sink()
    server.start()
    sink.start()
    procs = ours.Procs()
    before: dict[str, float] = {}
    replied: dict[str, float] = {}
    try:
        url = ours.prepare_db(server, "bench_latency_split")
        api = ours.start_api(procs, url, stack=False)
        if not args.no_worker:
            ours.start_workers(procs, url, 1)
        ours.create_endpoint(api, sink.url)
        time.sleep(2)
        mark = sink.mark()
        start = time.monotonic()
        for i in range(args.n):
            delay = start + i * args.interval / 1000 - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            sent = time.time()
            reply = ours.post_job(
                api,
                {
                    "endpoint": ours.ENDPOINT,
                    "trigger": "IMMEDIATE",
                    "idempotency_key": f"s-{i}",
                    "input": {"n": i},
                },
            )
            execution_id = reply["execution"]["execution_id"]
            before[execution_id], replied[execution_id] = sent, time.time()
        received = {} if args.no_worker else workloads.collect(sink, mark, set(before), 30)
    finally:
        procs.stop()
        sink.stop()
        server.stop()
    rows = [("API call", [replied[k] - before[k] for k in before])]
    if not args.no_worker:
        rows += [
            ("reply -> sink", [received[k] - replied[k] for k in received]),
            ("POST /jobs -> target", [received[k] - before[k] for k in received]),
        ]
        progress(f"{len(received)} of {len(before)} delivered")
    title = f"ms, one job every {args.interval:g} ms"
    print(f"{title:<28}{'p50':>8}{'p90':>8}{'p99':>8}")
    for name, values in rows:
        found = [percentile(values, q) for q in (50, 90, 99)]
        cells = "".join(f"{'n/a':>8}" if v is None else f"{1000 * v:>8.2f}" for v in found)
        print(f"{name:<28}{cells}")


if __name__ == "__main__":
    main()
