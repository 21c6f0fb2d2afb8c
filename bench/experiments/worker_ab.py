"""Two checkouts' workers against each other and PgQueuer, interleaved round by round.

Each round runs PgQueuer (batch 50, 100 tasks, as workload 2), then workload 1 (N seeded
IMMEDIATE executions, one worker process, default settings) with the worker of checkout A,
then with the worker of checkout B, on the same durable PostgreSQL and nginx sink. Prints
each round's rates, per-delivery commits and WAL bytes, and the medians of the per-round
ratios to PgQueuer: a hot-path change's before/after in one run.

Usage (bench venv, from either checkout):
    python bench/experiments/worker_ab.py /path/to/A /path/to/B [N] [ROUNDS]
Each checkout needs its .venv (a link to the project's venv is enough).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ours
import peers
from common import progress
from pgserver import PgServer
from sink import Sink


def run_tree(tree: Path, server: PgServer, sink: Sink, n: int) -> dict[str, Any]:
    """Workload 1 with the worker of checkout ``tree`` (ours.py runs ROOT's code)."""
    ours.ROOT, ours.PROJECT_PY = tree, tree / ".venv" / "bin" / "python"
    return ours.run_throughput(server, sink.url, n, 1)


def main() -> None:
    a, b = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 20_000
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    server, sink = PgServer(), Sink()
    server.start()
    sink.start()
    results: list[dict[str, Any]] = []
    try:
        for r in range(rounds):
            progress(f"-- round {r + 1}/{rounds} (N={n})")
            results.append(
                {
                    "pgqueuer": peers.run_pgqueuer(server, sink.url, n),
                    "a": run_tree(a, server, sink, n),
                    "b": run_tree(b, server, sink, n),
                }
            )
    finally:
        sink.stop()
        server.stop()
    keys = ("per_s", "commits_per_delivery", "wal_bytes_per_delivery", "worker_cpu_s")
    for r in results:
        print(json.dumps({name: {k: r[name].get(k) for k in keys} for name in r}))
    for name in ("a", "b"):
        ratios = [r[name]["per_s"] / r["pgqueuer"]["per_s"] for r in results]
        rates = [r[name]["per_s"] for r in results]
        print(
            f"{name} ({[a, b][name == 'b']}): median {statistics.median(rates):.0f}/s, "
            f"ratio to PgQueuer {statistics.median(ratios):.2f} "
            f"(rounds {', '.join(f'{x:.2f}' for x in ratios)})"
        )


if __name__ == "__main__":
    main()
