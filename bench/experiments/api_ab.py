"""Several checkouts' POST /jobs against each other, interleaved round by round.

Each round runs workload 8 (``workloads.api_rates``: N sequential requests, N from 8
clients, N in process) with the API of each checkout in turn, on one PostgreSQL and sink;
the harness (this bench/) is the same for all, and each checkout's API, migrations and
``bench/ours_inproc.py`` are its own. Prints each round's rates, each checkout's medians
and, for each checkout before the last, the median of the last one's per-round ratios to
it: a ``POST /jobs`` change's before/after in one run.

Usage (bench venv):
    python bench/experiments/api_ab.py N ROUNDS /path/to/A /path/to/B [...]
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
import workloads
from pgserver import PgServer
from sink import Sink

RATES = ("sequential_per_s", "concurrent8_per_s", "inprocess_per_s")


def main(n: int, rounds: int, trees: list[Path]) -> None:
    server, sink = PgServer(), Sink()
    server.start()
    sink.start()
    runs: list[list[dict[str, Any]]] = [[] for _ in trees]  # by position: a tree may repeat
    try:
        for round_no in range(rounds):
            for i, tree in enumerate(trees):
                ours.ROOT, ours.BENCH = tree, tree / "bench"  # this checkout's API
                out = workloads.api_rates(server, sink, n)
                runs[i].append(out)
                print(json.dumps({"round": round_no, "tree": str(tree), **out}), flush=True)
    finally:
        sink.stop()
        server.stop()
    for tree, tree_runs in zip(trees, runs, strict=True):
        medians = {k: round(statistics.median(o[k] for o in tree_runs), 1) for k in RATES}
        print(tree, medians)
    for tree, tree_runs in zip(trees[:-1], runs[:-1], strict=True):
        pairs = list(zip(tree_runs, runs[-1], strict=True))
        ratios = {k: round(statistics.median(b[k] / a[k] for a, b in pairs), 3) for k in RATES}
        print(f"{trees[-1]} / {tree}:", ratios)


if __name__ == "__main__":
    if len(sys.argv) < 5:
        raise SystemExit(__doc__)
    main(int(sys.argv[1]), int(sys.argv[2]), [Path(p).resolve() for p in sys.argv[3:]])
