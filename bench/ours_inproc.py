"""Helpers that run inside the project's venv (.venv), next to the code under test.

Subcommands (each prints one JSON line, or serves until SIGTERM):

* ``serve-api HOST PORT``: the API alone on Chalice's local server (``make_api_server``),
  no worker or scheduler in the process; TE_* from the environment.
* ``inproc-api N``: POST /jobs N times through ``chalice.test.Client`` (no HTTP), rate.
* ``import-app``: time ``import app`` in this fresh interpreter (cold import).
* ``scale-probe JOB_ID REPEAT``: time the worker's claim query (rolled back, so the due
  rows stay due) and the executions list page; EXPLAIN of the claim.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import sys
import time
from typing import Any


def serve_api(host: str, port: int) -> None:
    from chalicelib.local.server import make_api_server
    from chalicelib.wiring.app import build_app

    server = make_api_server(build_app(), host, port)

    def stop(*_: Any) -> None:
        # shutdown() from the thread running serve_forever() would deadlock: leave instead.
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    server.server.serve_forever()


def inproc_api(n: int) -> None:
    from chalice.test import Client

    import app as app_module

    headers = {
        "Authorization": f"Bearer {os.environ['TE_BOOTSTRAP_API_KEY']}",
        "Content-Type": "application/json",
    }
    with Client(app_module.app) as client:
        times = []
        for i in range(n):
            body = {
                "endpoint": "bench-sink",
                "trigger": "IMMEDIATE",
                "idempotency_key": f"inproc-{os.getpid()}-{i}",
                "input": {"n": i},
            }
            start = time.perf_counter()
            reply = client.http.post("/jobs", headers=headers, body=json.dumps(body))
            times.append(time.perf_counter() - start)
            if reply.status_code not in (200, 201):
                raise SystemExit(f"POST /jobs answered {reply.status_code}: {reply.body!r}")
    total = sum(times)
    print(json.dumps({"n": n, "per_s": n / total, "p50_ms": statistics.median(times) * 1000}))


def import_app() -> None:
    start = time.perf_counter()
    import app  # noqa: F401

    elapsed = time.perf_counter() - start
    heavy = sorted(
        m for m in ("kafka", "redis", "boto3", "botocore", "urllib3", "pg8000") if m in sys.modules
    )
    print(json.dumps({"import_s": elapsed, "heavy_modules_loaded": heavy}))


def _claim_query(capped: bool = False) -> tuple[str, Any]:
    """The worker's PostgreSQL claim statement (a Query), rendered as the worker renders it:
    with ``capped``, the one it sends while an endpoint is at its cap on it."""
    try:
        from chalicelib.domain.regions import ALL_REGIONS
        from chalicelib.worker.strategies import render
    except ImportError as exc:
        raise SystemExit(json.dumps({"status": "missing", "reason": str(exc)})) from exc
    name = "worker_claim_skip_locked_capped" if capped else "worker_claim_skip_locked"
    return name, render(name, ALL_REGIONS)


def scale_probe(job_id: str, repeat: int) -> None:
    from chalicelib.wiring.process import ProcessRoot

    name, claim = _claim_query()
    db = ProcessRoot().database("worker")
    from chalicelib.worker.strategies import ClaimLimits

    # As a worker with 50 free slots claims: the default lease and per-endpoint share.
    limits = ClaimLimits(default_cap=25).params()
    params = {"worker_id": "bench-probe", "batch": 50, **limits}
    claim_times: list[float] = []
    from chalicelib.db.shapes import shaped

    claim, params = shaped(claim, params)  # only the parameters the statement names
    plan_rows = db.transaction(
        lambda tx: tx.run("EXPLAIN " + claim.sql, **params), name="bench_explain"
    )
    plan = [next(iter(r.values())) for r in plan_rows]
    for _ in range(repeat):
        claim_times.append(_timed_rollback(db, claim, params))
    page_times = _list_page_times(job_id, repeat)
    print(
        json.dumps(
            {
                "claim_query": name,
                "claim_ms_median": statistics.median(claim_times) * 1000,
                "list_page_ms_median": statistics.median(page_times) * 1000,
                "uses_pickup_index": any("idx_executions_due" in line for line in plan),
                "plan": plan,
            }
        )
    )


class _Rollback(Exception):
    pass


def _timed_rollback(db: Any, sql: Any, params: dict[str, Any]) -> float:
    elapsed: list[float] = []

    def work(tx: Any) -> None:
        start = time.perf_counter()
        tx.run(sql, **params)
        elapsed.append(time.perf_counter() - start)
        raise _Rollback

    with contextlib.suppress(_Rollback):
        db.transaction(work, name="bench_claim_probe")
    return elapsed[-1]


def _list_page_times(job_id: str, repeat: int) -> list[float]:
    from chalice.test import Client

    import app as app_module

    headers = {"Authorization": f"Bearer {os.environ['TE_BOOTSTRAP_API_KEY']}"}
    times = []
    with Client(app_module.app) as client:
        for _ in range(repeat):
            start = time.perf_counter()
            reply = client.http.get(f"/jobs/{job_id}/executions?limit=50", headers=headers)
            times.append(time.perf_counter() - start)
            if reply.status_code != 200:
                raise SystemExit(f"list page answered {reply.status_code}: {reply.body!r}")
    return times


def main() -> None:
    command, args = sys.argv[1], sys.argv[2:]
    if command == "serve-api":
        serve_api(args[0], int(args[1]))
    elif command == "inproc-api":
        inproc_api(int(args[0]))
    elif command == "import-app":
        import_app()
    elif command == "scale-probe":
        scale_probe(args[0], int(args[1]))
    else:
        raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    main()
