"""What the worker's statements cost at each batch size: the fixed part and the part per row.

Seeds N due executions of one endpoint (as workload 1 does) on the bench's durable
PostgreSQL, then times, from the worker's own code and session (READ COMMITTED,
``force_generic_plan``, the claim strategy's statements), for each size K:

* ``worker_record_and_claim``: recording K finished executions and claiming K;
* ``worker_finalize_batch`` alone, recording K;
* ``worker_claim_skip_locked`` alone, claiming K.

Client-side times, medians. ``--explain K`` prints ``EXPLAIN (ANALYZE, BUFFERS)`` of one
record-and-claim of K instead (the plan the worker keeps, after warm-up calls).

Usage (bench venv): python bench/experiments/statement_sizes.py [N] [--sizes 1,5,20,40,80]
    [--explain K]

The bench venv seeds (psycopg); the measuring half runs this file again under the project's
venv (``--measure URL``), where the worker's modules are.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

WORKER_ID = "w-statement-sizes"


def measure(url: str, sizes: list[int], explain: int | None) -> None:
    """Project venv: the timings (or the plan) on the seeded database at ``url``."""
    from chalicelib.db.connection import Database
    from chalicelib.db.queries import queries
    from chalicelib.db.shapes import shaped
    from chalicelib.domain.statuses import AttemptStatus, ExecutionStatus
    from chalicelib.worker.models import ClaimedExecution, FinishedExecution
    from chalicelib.worker.strategies import ClaimLimits, SkipLockedClaim

    db = Database.from_url(
        url, pool_size=1, isolation="read committed", plan_cache_mode="force_generic_plan"
    )
    strategy = SkipLockedClaim()
    limits = ClaimLimits(default_cap=1000)  # one endpoint, never at its cap
    record = {"writer": f"{WORKER_ID}/0"}

    def results(held: list[ClaimedExecution]) -> str:
        now = datetime.now(UTC)
        finished = [
            FinishedExecution(
                execution_id=c.execution_id,
                endpoint=c.endpoint,
                attempt_number=c.attempt,
                attempt_status=AttemptStatus.SUCCESS,
                next_status=ExecutionStatus.SUCCESS,
                started_at=now,
                completed_at=now,
                duration_ms=1,
                output={"status_code": 200, "body": ""},
                log_message=f"Attempt {c.attempt} succeeded (status_code=200).",
                follows=False,
            ).to_json()
            for c in held
        ]
        return json.dumps(finished, separators=(",", ":"))

    def record_and_claim(held: list[ClaimedExecution], k: int) -> list[ClaimedExecution]:
        params = {**record, "results": results(held)}
        _, claimed = db.transaction(
            lambda tx: strategy.record_and_claim(tx, WORKER_ID, k, limits, params),
            name="worker_record_and_claim",
            single=True,
        )
        return claimed

    def finalize(held: list[ClaimedExecution]) -> None:
        payload = results(held)
        db.transaction(
            lambda tx: tx.run(
                queries["worker_finalize_batch"], results=payload, worker_id=WORKER_ID, **record
            ),
            name="worker_finalize_batch",
            single=True,
        )

    def timed(work: Any) -> tuple[float, Any]:
        started = time.perf_counter()
        value = work()
        return time.perf_counter() - started, value

    if explain is not None:
        held = strategy.claim(db, WORKER_ID, explain, limits)
        for _ in range(8):  # past the plan cache's custom plans: the worker's generic plan
            held = record_and_claim(held, explain)
        shape, values = shaped(
            strategy._with_record,  # the very statement the worker sends
            {**limits.params(), **record, "results": results(held)}
            | {"worker_id": WORKER_ID, "batch": explain},
        )
        plan = dataclasses.replace(shape, sql="EXPLAIN (ANALYZE, BUFFERS) " + shape.sql)
        rows = db.transaction(lambda tx: tx.run(plan, **values), name="explain", single=True)
        print("\n".join(str(next(iter(row.values()))) for row in rows))
        return
    print(f"{'K':>4}{'record and claim':>20}{'record alone':>16}{'claim alone':>15}")
    for k in sizes:
        held = strategy.claim(db, WORKER_ID, k, limits)
        both, alone, claims = [], [], []
        for _ in range(15):
            elapsed, held = timed(lambda: record_and_claim(held, k))  # noqa: B023
            both.append(elapsed)
        for _ in range(10):
            alone.append(timed(lambda: finalize(held))[0])  # noqa: B023
            elapsed, held = timed(lambda: strategy.claim(db, WORKER_ID, k, limits))  # noqa: B023
            claims.append(elapsed)
        finalize(held)
        ms = [1000 * statistics.median(times) for times in (both, alone, claims)]
        print(f"{k:>4}{ms[0]:>17.2f} ms{ms[1]:>13.2f} ms{ms[2]:>12.2f} ms", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", type=int, nargs="?", default=20_000)
    parser.add_argument("--sizes", default="1,5,20,40,80")
    parser.add_argument("--explain", type=int, metavar="K")
    parser.add_argument("--measure", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [int(k) for k in args.sizes.split(",")]
    if args.measure:
        measure(args.measure, sizes, args.explain)
        return

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import ours
    from common import PROJECT_PY, ROOT, progress
    from pgserver import PgServer
    from sink import Sink

    needed = 10 * args.explain if args.explain else 26 * sum(sizes)  # batches claimed, by size
    if args.n < needed:
        raise SystemExit(f"N too small: these sizes claim {needed} executions")
    server, sink = PgServer(), Sink()
    server.start()
    sink.start()
    try:
        url = ours.prepare_db(server, "bench_statement_sizes")
        with server.connect("bench_statement_sizes") as conn:
            ours.seed_endpoint_sql(conn, sink.url)
            ours.seed_immediate_sql(conn, sink.url, args.n)
        progress(f"{args.n} executions due; measuring with the worker's code")
        command = [str(PROJECT_PY), __file__, "--measure", url, "--sizes", args.sizes]
        if args.explain:
            command += ["--explain", str(args.explain)]
        subprocess.run(command, check=True, env=os.environ | {"PYTHONPATH": str(ROOT)})
    finally:
        sink.stop()
        server.stop()


if __name__ == "__main__":
    main()
