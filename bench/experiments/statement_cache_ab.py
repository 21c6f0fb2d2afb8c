"""A/B: the worker as is vs. with pg8000 ``to_statement`` memoized, paired runs.

Usage (bench venv): python bench/experiments/statement_cache_ab.py [N] [ROUNDS]
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ours
from common import BENCH, PROJECT_PY
from pgserver import PgServer
from sink import Sink

AS_IS = ours.start_workers


def cached(procs: ours.Procs, url: str, count: int, **extra: str) -> None:
    launcher = BENCH / "experiments" / "cached_worker.py"
    for _ in range(count):
        procs.start(
            "worker-cached", [str(PROJECT_PY), str(launcher)], ours.project_env(url, **extra)
        )


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    server, sink = PgServer(), Sink()
    server.start()
    sink.start()
    runs: dict[str, list[dict[str, Any]]] = {"as_is": [], "cached": []}
    try:
        for _ in range(rounds):
            for name, starter in (("as_is", AS_IS), ("cached", cached)):
                ours.start_workers = starter  # type: ignore[assignment]
                runs[name].append(ours.run_throughput(server, sink.url, n, 1))
    finally:
        sink.stop()
        server.stop()
    pairs = [c["per_s"] / a["per_s"] for a, c in zip(runs["as_is"], runs["cached"], strict=True)]
    for name, items in runs.items():
        print(
            name,
            "per_s",
            [round(r["per_s"]) for r in items],
            "cpu_s",
            [round(r["worker_cpu_s"], 1) for r in items],
        )
    print("paired ratio median", round(statistics.median(pairs), 3))


if __name__ == "__main__":
    main()
