"""The retention purge against the hot path: claim time and delivery throughput while the
housekeeper deletes a million rows of history, next to the same run with retention off.

Per mode (``idle``: TE_EXECUTION_RETENTION_DAYS=0, ``purging``: 30), on a fresh database:
HISTORY one-shot jobs 40 days old, each with a SUCCESS execution, one attempt and one log
row (4 rows each: HISTORY=250,000 is a million rows), 200 due QUEUED cron ticks and N
QUEUED IMMEDIATE executions. Then ``python -m chalicelib.scheduler`` starts; after 2 s the
worker's claim statement is timed (30 rolled-back runs, ``ours_inproc.py scale-probe``),
the due ticks are cancelled, and one worker delivers the N executions (rate as in workload
1). In ``purging`` mode the purge keeps running until the history is gone; its rate is
reported.

Usage (bench venv): python bench/experiments/purge_under_load.py [HISTORY] [N] [ROUNDS]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ours
from common import BENCH, PROJECT_PY, progress, run_json
from pgserver import PgServer
from sink import Sink

SEED_HISTORY = """
WITH j AS (
    INSERT INTO jobs (endpoint, endpoint_type, trigger_type, idempotency_key, input,
                      endpoint_snapshot, created_at)
    SELECT %(ep)s, 'HTTP', 'IMMEDIATE', 'old-' || g, jsonb_build_object('n', g),
           %(snap)s::jsonb, now() - interval '40 days' + g * interval '1 ms'
    FROM generate_series(1, %(n)s::int) g
    RETURNING job_id, idempotency_key, input, created_at
), e AS (
    INSERT INTO executions (job_id, endpoint, endpoint_type, idempotency_key, status, input,
                            attempt_count, max_attempts, run_at, started_at, completed_at,
                            duration_ms, created_at)
    SELECT job_id, %(ep)s, 'HTTP', idempotency_key, 'SUCCESS', input, 1, 3, created_at,
           created_at, created_at + interval '20 ms', 20, created_at FROM j
    RETURNING execution_id, started_at, completed_at
), a AS (
    INSERT INTO attempts (execution_id, attempt_number, status, started_at, completed_at,
                          duration_ms, output)
    SELECT execution_id, 1, 'SUCCESS', started_at, completed_at, 20,
           '{"status_code": 200}'::jsonb FROM e
    RETURNING execution_id
)
INSERT INTO execution_logs (execution_id, attempt_number, level, message, logged_at)
SELECT execution_id, 1, 'INFO', 'Attempt 1 SUCCESS.', completed_at FROM e
"""

SEED_DUE = """
WITH c AS (
    INSERT INTO jobs (endpoint, endpoint_type, trigger_type, cron_expression, cron_timezone,
                      cron_next_run_at, endpoint_snapshot)
    VALUES (%(ep)s, 'HTTP', 'CRON', '* * * * *', 'UTC', now() + interval '1 day', %(snap)s::jsonb)
    RETURNING job_id
)
INSERT INTO executions (job_id, endpoint, endpoint_type, status, run_at)
SELECT job_id, %(ep)s, 'HTTP', 'QUEUED', now() - interval '1 second'
FROM c, generate_series(1, 200)
RETURNING job_id
"""


FRESH = "idempotency_key LIKE 'bench-%%'"  # the N executions seed_immediate_sql wrote


def wait_delivered(conn: Any, n: int, workers: ours.Procs, label: str) -> None:
    last, changed = -1, time.monotonic()
    while True:
        done = conn.execute(
            f"SELECT count(*) FROM executions WHERE {FRESH} AND status IN {ours.TERMINAL}"
        ).fetchone()[0]
        if done >= n:
            return
        if done != last:
            last, changed = done, time.monotonic()
        if time.monotonic() - changed > 60:
            raise RuntimeError(f"{label}: no progress for 60 s at {done}/{n}")
        workers.check_alive()
        time.sleep(0.25)


def delivery_rate(conn: Any) -> float | None:
    success, window = conn.execute(
        f"SELECT count(*) FILTER (WHERE status = 'SUCCESS'),"
        f" EXTRACT(EPOCH FROM max(completed_at) - min(started_at))"
        f" FROM executions WHERE {FRESH}"
    ).fetchone()
    return success / float(window) if window else None


def history_left(conn: Any) -> int:
    row = conn.execute(
        "SELECT count(*) FROM executions WHERE created_at < now() - interval '30 days'"
    ).fetchone()
    return int(row[0])


def run_mode(server: PgServer, sink_url: str, mode: str, history: int, n: int) -> dict[str, Any]:
    name = f"bench_purge_{mode}"
    url = ours.prepare_db(server, name)
    retention = "30" if mode == "purging" else "0"
    with server.connect(name) as conn:
        ours.seed_endpoint_sql(conn, sink_url)
        params = {"ep": ours.ENDPOINT, "snap": ours.snapshot(sink_url), "n": history}
        conn.execute(SEED_HISTORY, params)
        cron_job = conn.execute(SEED_DUE, params).fetchone()[0]
        ours.seed_immediate_sql(conn, sink_url, n)  # ANALYZEs
        conn.execute("CHECKPOINT")
        progress(f"{mode}: seeded {history} old jobs ({4 * history} rows), {n} queued")
        procs = ours.Procs()
        env = ours.project_env(url, TE_EXECUTION_RETENTION_DAYS=retention)
        try:
            procs.start("scheduler", [str(PROJECT_PY), "-m", "chalicelib.scheduler"], env)
            started = time.monotonic()
            time.sleep(2)
            probe = run_json(
                [str(PROJECT_PY), str(BENCH / "ours_inproc.py"), "scale-probe", cron_job, "30"],
                env=ours.project_env(url),
                timeout=600,
            )
            conn.execute(
                "UPDATE executions SET status = 'CANCELLED', completed_at = now()"
                " WHERE job_id = %s AND status = 'QUEUED'",
                (cron_job,),
            )
            left_at_worker_start = history_left(conn)
            workers = ours.Procs()
            try:
                ours.start_workers(workers, url, 1)
                wait_delivered(conn, n, workers, f"{mode} worker")
            finally:
                workers.stop()
            rate = delivery_rate(conn)
            left_at_worker_end = history_left(conn)
            purge_s = None
            if mode == "purging":
                while history_left(conn) and time.monotonic() - started < 900:
                    time.sleep(0.5)
                purge_s = time.monotonic() - started
        finally:
            procs.stop()
    out = {
        "mode": mode,
        "claim_ms_median": probe["claim_ms_median"],
        "uses_pickup_index": probe["uses_pickup_index"],
        "per_s": rate,
        "history_left_at_worker_start": left_at_worker_start,
        "history_left_at_worker_end": left_at_worker_end,
        "purge_all_s": purge_s,
    }
    progress(f"{mode}: {out}")
    server.wait_idle(name)
    return out


def main() -> None:
    history = int(sys.argv[1]) if len(sys.argv) > 1 else 250_000
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 20_000
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    server, sink = PgServer(), Sink()
    server.start()
    sink.start()
    runs: list[dict[str, Any]] = []
    try:
        for _ in range(rounds):
            for mode in ("idle", "purging"):
                runs.append(run_mode(server, sink.url, mode, history, n))
    finally:
        sink.stop()
        server.stop()
    for mode in ("idle", "purging"):
        mine = [r for r in runs if r["mode"] == mode]
        print(
            mode,
            "claim ms",
            [round(r["claim_ms_median"], 2) for r in mine],
            "deliveries/s",
            [round(r["per_s"] or 0) for r in mine],
            "history left start/end",
            [(r["history_left_at_worker_start"], r["history_left_at_worker_end"]) for r in mine],
            "purge all s",
            [r["purge_all_s"] and round(r["purge_all_s"], 1) for r in mine],
        )
    idle = [r["per_s"] for r in runs if r["mode"] == "idle"]
    purging = [r["per_s"] for r in runs if r["mode"] == "purging"]
    ratio = statistics.median(purging) / statistics.median(idle)
    print("throughput ratio purging/idle", round(ratio, 3))


if __name__ == "__main__":
    main()
