"""Delivery with ordering keys against delivery without, the same worker, round by round.

Each round runs workload 1 (N seeded IMMEDIATE executions, one worker process, default
settings) twice on the same durable PostgreSQL and nginx sink: unkeyed, then spread over K
ordering keys of the one endpoint (N/K executions per key, each key's executions one at a
time in creation order). Prints each run's rate and work per delivered job, and the median
of the per-round ratios keyed ÷ unkeyed (the bar: at least 0.5 with 1,000 keys of 10).

Usage (bench venv, from the checkout to measure):
    python bench/experiments/keyed_rate.py [N] [K] [ROUNDS]      (defaults 10000 1000 3)
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jobcost
import ours
from common import progress
from pgserver import PgServer
from sink import Sink


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", type=int, nargs="?", default=10_000)
    parser.add_argument("keys", type=int, nargs="?", default=1_000)
    parser.add_argument("rounds", type=int, nargs="?", default=3)
    args = parser.parse_args()
    server, sink = PgServer(), Sink()
    server.start()
    sink.start()
    cpu = jobcost.MachineCpu().start()
    results: list[dict[str, Any]] = []
    try:
        for r in range(args.rounds):
            progress(f"-- round {r + 1}/{args.rounds} (N={args.n}, {args.keys} keys)")
            unkeyed = jobcost.on_machine(
                cpu, sink, lambda: ours.run_throughput(server, sink.url, args.n, 1)
            )
            keyed = jobcost.on_machine(
                cpu,
                sink,
                lambda: ours.run_throughput(server, sink.url, args.n, 1, ordering_keys=args.keys),
            )
            results.append({"unkeyed": unkeyed, "keyed": keyed})
    finally:
        cpu.stop()
        sink.stop()
        server.stop()
    for name in ("unkeyed", "keyed"):
        rates = [r[name]["per_s"] for r in results]
        jobs = [r[name]["per_job"] for r in results]
        print(
            f"{name}: median {statistics.median(rates):.0f}/s (rounds "
            f"{', '.join(f'{x:.0f}' for x in rates)}); per job statements "
            f"{_median(jobs, 'statements', '.3g')}, PostgreSQL CPU "
            f"{_median(jobs, 'pg_cpu_us')} µs, WAL {_median(jobs, 'wal_bytes')} B, worker "
            f"CPU {_median(jobs, 'worker_cpu_us')} µs"
        )
    ratios = [r["keyed"]["per_s"] / r["unkeyed"]["per_s"] for r in results]
    print(
        f"keyed ÷ unkeyed ({args.keys} keys of {args.n // args.keys}): median "
        f"{statistics.median(ratios):.2f} (rounds {', '.join(f'{x:.2f}' for x in ratios)})"
    )


def _median(jobs: list[dict[str, Any]], field: str, spec: str = ".0f") -> str:
    values = [j[field] for j in jobs if j.get(field) is not None]
    return format(statistics.median(values), spec) if values else "n/a"


if __name__ == "__main__":
    main()
