"""Two checkouts' workers against each other and PgQueuer, interleaved round by round.

Each round runs PgQueuer (batch 50, 100 tasks, as workload 2), then workload 1 (N seeded
IMMEDIATE executions, one worker process, default settings) with the worker of checkout A,
then with the worker of checkout B, on the same durable PostgreSQL and nginx sink. Prints
each round's rates, per-delivery commits and WAL bytes, the work per delivered job (client
statements with BEGIN/COMMIT/SET, PostgreSQL CPU, WAL bytes, worker CPU; bench/jobcost.py)
of PgQueuer, A and B, with the machine's CPU per job and cores busy over the busy middle
of each run (every process: jobcost.MachineCpu), and the medians of the per-round ratios
to PgQueuer: a hot-path change's before/after in one run.

Usage (bench venv, from either checkout):
    python bench/experiments/worker_ab.py /path/to/A /path/to/B [N] [ROUNDS] [--endpoints K]
        [--workers W]
``--endpoints K``: A's and B's N executions spread evenly over K endpoints (same sink URL)
instead of one. ``--workers W``: A's and B's workload 1 with W worker processes (PgQueuer
keeps its one). ``--execution-keys A|B``: that checkout's executions are seeded with their
job's idempotency key, as its POST /jobs wrote them (checkouts before 2026-11-26).
Each checkout needs its .venv (a link to the project's venv is enough).
The harness (ours.py, jobcost.py) is the one of the checkout this script is run from.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jobcost
import ours
import peers
from common import progress
from pgserver import PgServer
from sink import Sink


def run_tree(
    tree: Path, server: PgServer, sink: Sink, n: int, endpoints: int, keys: bool, workers: int = 1
) -> dict[str, Any]:
    """Workload 1 with the worker of checkout ``tree`` (ours.py runs ROOT's code)."""
    ours.ROOT, ours.PROJECT_PY = tree, tree / ".venv" / "bin" / "python"
    ours.EXECUTION_KEYS = keys
    return ours.run_throughput(server, sink.url, n, workers, endpoints=endpoints)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument("n", type=int, nargs="?", default=20_000)
    parser.add_argument("rounds", type=int, nargs="?", default=3)
    parser.add_argument("--endpoints", type=int, default=1, metavar="K")
    parser.add_argument("--workers", type=int, default=1, metavar="W")
    parser.add_argument("--execution-keys", choices=("A", "B"), action="append", default=[])
    args = parser.parse_args()
    a, b, n, rounds = args.a.resolve(), args.b.resolve(), args.n, args.rounds
    server, sink = PgServer(), Sink()
    server.start()
    sink.start()
    cpu = jobcost.MachineCpu().start()
    results: list[dict[str, Any]] = []

    def tree(path: Path, keys: str) -> Any:
        return jobcost.on_machine(
            cpu,
            sink,
            lambda: run_tree(
                path, server, sink, n, args.endpoints, keys in args.execution_keys, args.workers
            ),
        )

    try:
        for r in range(rounds):
            progress(
                f"-- round {r + 1}/{rounds} (N={n}, endpoints {args.endpoints}, "
                f"workers {args.workers})"
            )
            pgqueuer = jobcost.on_machine(
                cpu, sink, lambda: peers.run_pgqueuer(server, sink.url, n)
            )
            results.append({"pgqueuer": pgqueuer, "a": tree(a, "A"), "b": tree(b, "B")})
    finally:
        cpu.stop()
        sink.stop()
        server.stop()
    keys = ("per_s", "commits_per_delivery", "wal_bytes_per_delivery", "worker_cpu_s", "per_job")
    for r in results:
        print(json.dumps({name: {k: r[name].get(k) for k in keys} for name in r}))
    print_per_job(results, {"pgqueuer": "PgQueuer", "a": f"A ({a})", "b": f"B ({b})"})
    for name in ("a", "b"):
        ratios = [r[name]["per_s"] / r["pgqueuer"]["per_s"] for r in results]
        rates = [r[name]["per_s"] for r in results]
        print(
            f"{name} ({[a, b][name == 'b']}): median {statistics.median(rates):.0f}/s, "
            f"ratio to PgQueuer {statistics.median(ratios):.2f} "
            f"(rounds {', '.join(f'{x:.2f}' for x in ratios)})"
        )


def print_per_job(results: list[dict[str, Any]], labels: dict[str, str]) -> None:
    """Work per delivered job: medians per system, then the medians of the per-round
    ratios to PgQueuer beside the issue's targets."""
    summary = jobcost.summary(results, list(labels))
    print("work per delivered job (medians over rounds):")
    for name, f in summary["median"].items():
        print(
            f"  {labels[name]}: statements {_f(f['statements'], '.3g')} (BEGIN "
            f"{_f(f['begin'], '.3g')}, COMMIT {_f(f['commit'], '.3g')}, ROLLBACK "
            f"{_f(f['rollback'], '.3g')}, SET {_f(f['set'], '.3g')}), PostgreSQL CPU "
            f"{_f(f['pg_cpu_us'])} µs, WAL {_f(f['wal_bytes'])} B, worker CPU "
            f"{_f(f['worker_cpu_us'])} µs, machine CPU {_f(f['machine_cpu_us'])} µs "
            f"({_f(f['cores_busy'], '.2f')} cores busy)"
        )
    targets = summary["targets"]
    for key, f in summary["ratios"].items():
        name = key.split("/")[0]
        print(
            f"  {labels[name]} ÷ PgQueuer: "
            + ", ".join(
                f"{field} {_f(f[field], '.2f')}"
                + (f" (target <= {targets[field]:g})" if targets[field] is not None else "")
                for field in targets
            )
        )


def _f(value: float | None, spec: str = ".0f") -> str:
    return "n/a" if value is None else format(value, spec)


if __name__ == "__main__":
    main()
