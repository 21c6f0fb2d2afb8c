"""Scale benchmark: how the reads and the background passes grow with history.

Seeds, by SQL, a history of 10^4, 10^5 and 10^6 executions in turn (each size adds to the
one before) on the benchmark's durable PostgreSQL (bench/pgserver.py), and at each size
times every read route of the API, the worker's claim statement and one pass of each
background loop. Writes bench/results/scale.json and bench/results/scale.md (10^6 / 10^4
ratios).

The history (every size):

* 200 endpoints; half the executions are cron ticks, one cron job holding 10 % of all of
  them (a tick a minute), the rest spread over 99 more cron jobs; the other half are
  one-shot jobs (one execution each; a quarter DELAYED), a fifth of them in batches of
  1,000 (sharing one created_at);
* 86.5 % SUCCESS, 8 % FAILED, 3 % CANCELLED, the rest live (QUEUED, PENDING, RETRYING);
  0-3 attempts and about 2.2 log lines per execution; the
  last error types HTTP_ERROR, TIMEOUT, CONNECTION_ERROR and a rare TLS_ERROR (one in
  10,007); an execution every 6 seconds back in time (10^6 span 69 days);
* beside it, the same at every size (the issue's method): a live QUEUED backlog of 10^5
  created in the last hour, and a paused endpoint's QUEUED backlog of 10^5; 500 RUNNING
  executions whose lease expired (what the workers hold is bounded by their slots, not by
  history; these give the reclaimer's passes work); and rows that fill every filtered
  probe's page at every size (full_pages), so a ratio measures history, not page fill;
* as many attempts as the size recorded in the last hour (10^6 at 10^6);
* the delivery summary rows of 1 M attempts an hour as the housekeeper keeps them (four
  writers' minute rows of the last three minutes, two hours of series rows, the totals,
  two days of hourly marks), the same at every size;
* VACUUM ANALYZE and CHECKPOINT after each size; then, as the delayed promoter leaves a
  running deployment, the paused backlog parked and the waiting work counted into
  live_counts (migration 018).

Timing: the routes are called in-process through ``chalice.test.Client`` (the API Gateway
event path, no HTTP) in PostgreSQL's configuration (not the deployed stage's CockroachDB
one), in one process per size, so one pool connection serves them all:
each call runs ``--warmup`` times first (6: more than the five custom plans PostgreSQL
makes for a prepared statement before it may switch to a generic one), then ``--repeat``
times (median reported). Each list is timed on its first page and on a deep cursor (the
middle of the history), with no filter and with each filter. The claim statement is run
in a transaction rolled back (the due rows stay due). The loops run on a copy of the
database (they write: promote, reclaim, purge), a pass being ``run_once()`` of the loop
the scheduler builds from default settings; the first passes do the work that was due,
later ones what remains.

Usage (bench venv, as ``make bench-scale``):
    bench/.work/venv/bin/python bench/scale.py [--max 100000] [--repeat 20] [--warmup 6]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
SIZES = (10_000, 100_000, 1_000_000)
DB = "bench_scale_reads"
LOOPS_DB = "bench_scale_loops"
SECONDS_APART = 6  #: one execution every 6 s back from the end of history
BACKLOG = 100_000  #: the live QUEUED backlog, and the paused endpoint's, at every size
BATCH_BLOCK = 2_000  #: executions per block; a fifth of the blocks' one-shots are a batch
ENDPOINT_SPEC_URL = "http://127.0.0.1:9/unused"  # nothing is delivered
#: The loops' retention (days): longer than the history at 10^6 (69 days), so that each
#: housekeeper pass purges the seeded expired pages (_expired_pages) at every size. At 30
#: days the cron purge took real expired ticks at 10^6 (each on a heap page of its own) and
#: the seeded page (a few pages for 1,000 rows) at 10^4: the ratio compared a scattered
#: page with a compact one, not what the history costs the same purge.
LOOPS_RETENTION = "100"


# -- the harness (bench venv) --------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max", type=int, default=SIZES[-1], help="largest size to seed")
    parser.add_argument("--repeat", type=int, default=20, help="timed calls (median)")
    parser.add_argument("--warmup", type=int, default=6, help="untimed calls before")
    parser.add_argument("--out", type=Path, default=BENCH / "results", help="results dir")
    args = parser.parse_args()
    if args.warmup < 6:
        parser.error("--warmup must be at least 6: generic plans start after five runs")
    sizes = [s for s in SIZES if s <= args.max] or [args.max]

    sys.path.insert(0, str(BENCH))
    from pgserver import PgServer

    server = PgServer()
    server.start()
    try:
        run(server, sizes, args)
    finally:
        server.stop()


def run(server: Any, sizes: list[int], args: argparse.Namespace) -> None:
    """Seed each size in turn, probe it, write the results after each."""
    import ours
    from common import PROJECT_PY, machine, progress

    results: dict[str, Any] = {
        "machine": machine(),
        "method": {
            "client": "chalice.test.Client, in-process (no HTTP)",
            "warmup": args.warmup,
            "repeat": args.repeat,
            "statistic": "median ms",
        },
        "sizes": sizes,
        "seeded": {},
        "calls": {},
    }
    url = ours.prepare_db(server, DB)
    t_end = datetime.now().astimezone()
    with server.connect(DB) as conn:
        progress("scale: endpoints and cron jobs")
        setup(conn, ours, t_end)
    have = 0
    for size in sizes:
        started = time.monotonic()
        with server.connect(DB) as conn:
            grow(conn, have, size, t_end, progress)
            extras(conn, have, size, t_end, progress)
            progress(f"scale {size}: VACUUM ANALYZE, CHECKPOINT")
            conn.execute("VACUUM ANALYZE")
            conn.execute("CHECKPOINT")
            results["seeded"][str(size)] = counts(conn)
            targets = pick_targets(conn, size, t_end)
        have = size
        progress(f"scale {size}: seeded in {time.monotonic() - started:.0f}s")
        env = ours.project_env(url)
        spec = json.dumps({**targets, "warmup": args.warmup, "repeat": args.repeat})
        api = _project_json([str(PROJECT_PY), __file__, "probe", spec], env)
        progress(f"scale {size}: loops on a copy of the database")
        with server.connect() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{LOOPS_DB}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{LOOPS_DB}" TEMPLATE "{DB}" STRATEGY FILE_COPY')
        loops = _project_json(
            [str(PROJECT_PY), __file__, "loops", spec],
            ours.project_env(server.url(LOOPS_DB), TE_EXECUTION_RETENTION_DAYS=LOOPS_RETENTION),
        )
        with server.connect() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{LOOPS_DB}" WITH (FORCE)')
        for name, value in {**api, **loops}.items():
            results["calls"].setdefault(name, {})[str(size)] = value
        write(results, args.out)
        progress(f"scale {size}: done; {args.out / 'scale.md'} updated")


def _project_json(cmd: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run a probe in the project's venv: its progress lines pass through, its last stdout
    line is the JSON result."""
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[2]} failed ({proc.returncode}):\n{proc.stdout[-2000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def setup(conn: Any, ours: Any, t_end: datetime) -> None:
    """200 endpoints (the last paused), 100 cron jobs on the first 100 (ten of them due, for
    the materializer's passes)."""
    for i in range(200):
        ours.seed_endpoint_sql(conn, ENDPOINT_SPEC_URL, name=f"ep{i:03d}")
    conn.execute("UPDATE endpoints SET paused_at = now() WHERE name = 'ep199'")
    for i in range(100):
        conn.execute(
            "INSERT INTO jobs (job_id, endpoint, endpoint_type, trigger_type, cron_expression,"
            " cron_timezone, cron_next_run_at, created_at, endpoint_snapshot)"
            " VALUES (%s, %s, 'HTTP', 'CRON', '* * * * *', 'UTC', %s, %s, %s::jsonb)",
            (
                f"job_cron{i:03d}",
                f"ep{i:03d}",
                t_end + (timedelta(minutes=-5) if i < 10 else timedelta(minutes=1)),
                t_end - timedelta(days=400),
                ours.snapshot(ENDPOINT_SPEC_URL, name=f"ep{i:03d}"),
            ),
        )


def _has_column(conn: Any, table: str, column: str) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM information_schema.columns WHERE table_name = %s"
        " AND column_name = %s",
        (table, column),
    ).fetchone()
    return bool(row[0])


# One row per execution of (lo, hi]: what it belongs to, its status and times. g counts back
# from the end of history; cron ticks every tenth g (the big job) and four in ten (the
# others), one-shot jobs the other half.
SEED_ROWS = """
CREATE TEMP TABLE seed AS
WITH base AS (
    SELECT g,
           CASE WHEN g %% 10 = 0 THEN 'big' WHEN g %% 10 < 5 THEN 'cron' ELSE 'one' END AS kind,
           (g - 1) / %(block)s AS block,
           (g * 7919) %% 1000 AS h
    FROM generate_series(CAST(%(lo)s AS BIGINT) + 1, CAST(%(hi)s AS BIGINT)) AS g
), shaped AS (
    SELECT g, kind, h,
           kind = 'one' AND block %% 5 = 0 AS batched, block,
           CASE WHEN h < 865 THEN 'SUCCESS' WHEN h < 945 THEN 'FAILED'
                WHEN h < 975 THEN 'CANCELLED'
                WHEN h %% 4 = 0 THEN 'QUEUED'
                WHEN h %% 4 = 1 THEN CASE WHEN kind = 'one' THEN 'PENDING' ELSE 'QUEUED' END
                WHEN h %% 4 = 2 THEN 'RETRYING' ELSE 'QUEUED' END AS status,
           CASE WHEN g %% 10007 = 0 THEN 'TLS_ERROR' WHEN g %% 20 = 0 THEN 'CONNECTION_ERROR'
                WHEN g %% 4 = 0 THEN 'TIMEOUT' ELSE 'HTTP_ERROR' END AS error_type
    FROM base
)
SELECT g, kind, status, error_type, batched,
       CASE WHEN batched THEN 'batch_b' || block END AS batch_id,
       CASE kind WHEN 'big' THEN 'job_cron000'
                 WHEN 'cron' THEN 'job_cron' || lpad(CAST(1 + (g / 10) %% 99 AS TEXT), 3, '0')
                 ELSE 'job_o' || g END AS job_id,
       'exec_s' || g AS execution_id,
       CASE kind WHEN 'big' THEN 'ep000'
                 WHEN 'cron' THEN 'ep' || lpad(CAST(1 + (g / 10) %% 99 AS TEXT), 3, '0')
                 ELSE 'ep' || lpad(CAST((g * 31) %% 199 AS TEXT), 3, '0') END AS endpoint,
       CASE WHEN kind <> 'one' THEN 'CRON'
            WHEN status = 'PENDING' OR g %% 4 = 0 THEN 'DELAYED' ELSE 'IMMEDIATE' END AS trigger,
       CAST(%(t_end)s AS TIMESTAMPTZ) - CASE WHEN batched
            THEN (block * %(block)s + 1) * %(apart)s ELSE g * %(apart)s END
            * INTERVAL '1 second' AS created_at,
       CASE status WHEN 'SUCCESS' THEN 1 + CAST(g %% 5 = 0 AS INT)
                   WHEN 'FAILED' THEN 1 + g %% 3 WHEN 'CANCELLED' THEN g %% 2
                   WHEN 'RETRYING' THEN 1 ELSE 0 END AS attempt_count
FROM shaped
"""


def grow(conn: Any, lo: int, hi: int, t_end: datetime, progress: Any) -> None:
    """Executions (lo, hi] of the history, with their jobs, batches, attempts and logs."""
    params = {"lo": lo, "hi": hi, "t_end": t_end, "block": BATCH_BLOCK, "apart": SECONDS_APART}
    conn.execute("DROP TABLE IF EXISTS seed")
    conn.execute(SEED_ROWS, params)
    progress(f"scale {hi}: history {lo + 1:,}..{hi:,}: jobs and batches")
    conn.execute(
        "INSERT INTO batches (batch_id, total, created_at)"
        " SELECT batch_id, count(*), min(created_at) FROM seed WHERE batched GROUP BY batch_id"
    )
    conn.execute(
        "INSERT INTO jobs (job_id, endpoint, endpoint_type, trigger_type, run_at, created_at,"
        " batch_id, input)"
        " SELECT job_id, endpoint, 'HTTP', trigger,"
        " CASE WHEN trigger = 'DELAYED' THEN created_at END, created_at, batch_id,"
        " jsonb_build_object('n', g)"
        " FROM seed WHERE kind = 'one'"
    )
    progress(f"scale {hi}: history {lo + 1:,}..{hi:,}: executions")
    error_column = _has_column(conn, "executions", "last_error_type")
    conn.execute(
        "INSERT INTO executions (execution_id, job_id, endpoint, endpoint_type,"
        " idempotency_key, status, input, output, attempt_count, max_attempts, worker_id,"
        " run_at, started_at, completed_at, duration_ms, created_at, batch_id"
        + (", last_error_type" if error_column else "")
        + ") SELECT execution_id, job_id, endpoint, 'HTTP',"
        " CASE WHEN kind <> 'one' THEN 'tick:' || g END, status, jsonb_build_object('n', g),"
        " CASE WHEN status = 'SUCCESS' THEN CAST('{\"ok\": true}' AS JSONB) END,"
        " attempt_count, 3, NULL,"
        " CASE WHEN status = 'PENDING' THEN now() + INTERVAL '1 day' ELSE created_at END,"
        " CASE WHEN attempt_count > 0 THEN created_at END,"
        " CASE WHEN status IN ('SUCCESS', 'FAILED', 'CANCELLED')"
        "      THEN created_at + INTERVAL '200 ms' END,"
        " CASE WHEN status IN ('SUCCESS', 'FAILED') THEN 200 END, created_at, batch_id"
        + (
            ", CASE WHEN status IN ('FAILED', 'RETRYING')"
            " OR (status = 'CANCELLED' AND attempt_count > 0) THEN error_type END"
            if error_column
            else ""
        )
        + " FROM seed"
    )
    progress(f"scale {hi}: history {lo + 1:,}..{hi:,}: attempts and logs")
    conn.execute(
        "INSERT INTO attempts (execution_id, attempt_number, status, started_at, completed_at,"
        " duration_ms, output, error)"
        " SELECT s.execution_id, a, CASE WHEN s.status = 'SUCCESS' AND a = s.attempt_count"
        "   THEN 'SUCCESS' ELSE 'FAILED' END,"
        " s.created_at + (a - 1) * INTERVAL '100 ms', s.created_at + a * INTERVAL '100 ms', 100,"
        " CASE WHEN s.status = 'SUCCESS' AND a = s.attempt_count"
        "   THEN CAST('{\"ok\": true}' AS JSONB) END,"
        " CASE WHEN s.status = 'SUCCESS' AND a = s.attempt_count THEN NULL"
        "   ELSE jsonb_build_object('type', CASE WHEN a = s.attempt_count THEN s.error_type"
        "        ELSE 'TIMEOUT' END, 'message', 'seeded failure') END"
        " FROM seed AS s"
        " CROSS JOIN LATERAL generate_series(1, s.attempt_count) AS a"
    )
    conn.execute(
        "INSERT INTO execution_logs (execution_id, attempt_number, level, message, logged_at)"
        " SELECT execution_id, 0, 'INFO', 'Execution created (seeded).', created_at FROM seed"
        " UNION ALL"
        " SELECT s.execution_id, a, 'INFO', 'Attempt ' || a || ' ended (seeded).',"
        "   s.created_at + a * INTERVAL '100 ms'"
        " FROM seed AS s CROSS JOIN LATERAL generate_series(1, s.attempt_count) AS a"
    )
    conn.execute("DROP TABLE seed")


def extras(conn: Any, lo: int, hi: int, t_end: datetime, progress: Any) -> None:
    """Beside the history, the same at every size (seeded with the first): a QUEUED backlog
    of BACKLOG created in the last hour, the paused endpoint's backlog of BACKLOG, the
    summary rows of 1 M attempts an hour, 500 expired RUNNING rows, and FULL_PAGES; and,
    scaled with the size, (lo, hi] attempts recorded in the last hour (ten more on each of
    the newest history executions; no read counts them, the summary rows stand for them)."""
    a, b = (0, BACKLOG) if lo == 0 else (0, 0)
    progress(f"scale {hi}: backlogs of {BACKLOG:,} (first size), attempts to {hi:,}")
    if lo == 0:
        full_pages(conn, t_end)
        # The summary rows of a deployment delivering 1 M attempts an hour (the same at
        # every size: traffic, not history), as the housekeeper keeps them (migration
        # 019): each of four writers' minute rows of the last three minutes not rolled up
        # yet, per endpoint and outcome; two hours of series rows; the totals; and two
        # days of hourly marks of them.
        progress("scale: delivery_counts of 1 M attempts an hour")
        columns = (
            "INSERT INTO delivery_counts (grain, bucket_start, endpoint, outcome, error_type,"
            " writer, attempts, ended, duration_ms, le_10, le_50, le_100, le_250, le_500,"
            " le_1000, le_5000, le_30000)"
        )
        outcomes = (
            "(VALUES ('SUCCESS', '', 19), ('FAILED', 'HTTP_ERROR', 2))"
            " AS o (outcome, error_type, n)"
        )
        conn.execute(
            columns + " SELECT 'minute', date_trunc('minute', %(t_end)s::timestamptz)"
            " - m * INTERVAL '1 minute', 'ep' || lpad(CAST(e AS TEXT), 3, '0'), o.outcome,"
            " o.error_type, 'w' || w, o.n, o.n, o.n * 100, 0, 0, o.n, o.n, o.n, o.n, o.n, o.n"
            " FROM generate_series(0, 2) AS m, generate_series(0, 199) AS e,"
            " generate_series(1, 4) AS w, " + outcomes,
            {"t_end": t_end},
        )
        conn.execute(
            columns + " SELECT 'series', date_trunc('minute', %(t_end)s::timestamptz)"
            " - m * INTERVAL '1 minute', '', o.outcome, '', 'fold', o.n * 800, o.n * 800,"
            " o.n * 80000, 0, 0, 0, 0, 0, 0, 0, 0"
            " FROM generate_series(3, 119) AS m, " + outcomes,
            {"t_end": t_end},
        )
        conn.execute(
            columns + " SELECT 'total', TIMESTAMPTZ '1970-01-01Z',"
            " 'ep' || lpad(CAST(e AS TEXT), 3, '0'), o.outcome, o.error_type, 'fold',"
            " o.n * 100000, o.n * 100000, o.n * 10000000, 0, 0, 0, 0, 0, 0, 0, 0"
            " FROM generate_series(0, 199) AS e, " + outcomes,
        )
        conn.execute(
            "INSERT INTO delivery_marks (hour, endpoint, outcome, attempts, ended)"
            " SELECT date_trunc('hour', %(t_end)s::timestamptz) - h * INTERVAL '1 hour',"
            " 'ep' || lpad(CAST(e AS TEXT), 3, '0'), o.outcome, o.n * (100000 - h * 240),"
            " o.n * (100000 - h * 240)"
            " FROM generate_series(0, 48) AS h, generate_series(0, 199) AS e, " + outcomes,
            {"t_end": t_end},
        )
        running = "FROM generate_series(1, 500) AS i"
        conn.execute(
            "INSERT INTO jobs (job_id, endpoint, endpoint_type, trigger_type, created_at)"
            " SELECT 'job_r' || i, 'ep' || lpad(CAST(i % 199 AS TEXT), 3, '0'), 'HTTP',"
            " 'IMMEDIATE', now() - INTERVAL '20 minutes' " + running
        )
        conn.execute(
            "INSERT INTO executions (execution_id, job_id, endpoint, endpoint_type, status,"
            " attempt_count, max_attempts, worker_id, run_at, started_at, lease_expires_at,"
            " created_at)"
            " SELECT 'exec_r' || i, j.job_id, j.endpoint, 'HTTP', 'RUNNING', 1, 3,"
            " 'bench-gone', j.created_at, j.created_at, j.created_at + INTERVAL '5 minutes',"
            " j.created_at FROM jobs AS j JOIN generate_series(1, 500) AS i"
            " ON j.job_id = 'job_r' || i"
        )
    for prefix, endpoint, window in (("q", None, 3600), ("p", "ep199", 86400)):
        params = {"a": a, "b": b, "t_end": t_end, "step": window / max(b, 1)}
        where = (
            "CAST(%(endpoint)s AS TEXT)"
            if endpoint
            else ("'ep' || lpad(CAST(100 + i %% 99 AS TEXT), 3, '0')")
        )
        params["endpoint"] = endpoint
        rows = (
            f"SELECT i, {where} AS endpoint,"
            " CAST(%(t_end)s AS TIMESTAMPTZ) - i * %(step)s * INTERVAL '1 second' AS t"
            " FROM generate_series(%(a)s + 1, %(b)s) AS i"
        )
        conn.execute(
            "INSERT INTO jobs (job_id, endpoint, endpoint_type, trigger_type, created_at, input)"
            f" SELECT 'job_{prefix}' || i, endpoint, 'HTTP', 'IMMEDIATE', t,"
            " jsonb_build_object('n', i) FROM (" + rows + ") AS r",
            params,
        )
        conn.execute(
            "INSERT INTO executions (execution_id, job_id, endpoint, endpoint_type, status,"
            " input, run_at, created_at, max_attempts)"
            f" SELECT 'exec_{prefix}' || i, 'job_{prefix}' || i, endpoint, 'HTTP', 'QUEUED',"
            " jsonb_build_object('n', i), t, t, 3 FROM (" + rows + ") AS r",
            params,
        )
        conn.execute(
            "INSERT INTO execution_logs (execution_id, attempt_number, level, message,"
            " logged_at)"
            f" SELECT 'exec_{prefix}' || i, 0, 'INFO', 'Execution created (seeded).', t"
            " FROM (" + rows + ") AS r",
            params,
        )
    a, b = lo // 10, hi // 10
    conn.execute(
        "INSERT INTO attempts (execution_id, attempt_number, status, started_at, completed_at,"
        " duration_ms, error)"
        " SELECT 'exec_s' || i, 10 + k, CASE WHEN k %% 10 = 0 THEN 'FAILED' ELSE 'SUCCESS' END,"
        " t, t + INTERVAL '100 ms', 100,"
        ' CASE WHEN k %% 10 = 0 THEN CAST(\'{"type": "HTTP_ERROR"}\' AS JSONB) END'
        " FROM generate_series(%(a)s + 1, %(b)s) AS i"
        " CROSS JOIN generate_series(0, 9) AS k"
        " CROSS JOIN LATERAL (SELECT CAST(%(t_end)s AS TIMESTAMPTZ)"
        "   - ((i - 1) * 10 + k) * %(step)s * INTERVAL '1 second' AS t) AS at",
        {"a": a, "b": b, "t_end": t_end, "step": 3600 / max(hi, 1)},
    )


def full_pages(conn: Any, t_end: datetime) -> None:
    """Rows that fill every filtered probe's page at every size, older than any history
    (80 days back), so a ratio between sizes measures what the history costs, not how full
    the page is: on ep005, 120 one-shot jobs that succeeded, 60 that failed with the rare
    TLS_ERROR, 60 QUEUED and 60 PENDING (due in a day). Without them a filter's page at
    10^4 holds a handful of rows and at 10^6 a full page of 51."""
    rows = (
        "SELECT i, CASE WHEN i <= 120 THEN 'SUCCESS' WHEN i <= 180 THEN 'FAILED'"
        " WHEN i <= 240 THEN 'QUEUED' ELSE 'PENDING' END AS status,"
        " CAST(%(t_end)s AS TIMESTAMPTZ) - INTERVAL '80 days' - i * INTERVAL '1 second' AS t"
        " FROM generate_series(1, 300) AS i"
    )
    conn.execute(
        "INSERT INTO jobs (job_id, endpoint, endpoint_type, trigger_type, created_at)"
        " SELECT 'job_f' || i, 'ep005', 'HTTP',"
        " CASE WHEN status = 'PENDING' THEN 'DELAYED' ELSE 'IMMEDIATE' END, t"
        " FROM (" + rows + ") AS r",
        {"t_end": t_end},
    )
    conn.execute(
        "INSERT INTO executions (execution_id, job_id, endpoint, endpoint_type, status,"
        " attempt_count, max_attempts, run_at, created_at, completed_at, last_error_type)"
        " SELECT 'exec_f' || i, 'job_f' || i, 'ep005', 'HTTP', status,"
        " CASE WHEN status IN ('SUCCESS', 'FAILED') THEN 1 ELSE 0 END, 3,"
        " CASE WHEN status = 'PENDING' THEN CAST(%(t_end)s AS TIMESTAMPTZ) + INTERVAL '1 day'"
        " ELSE t END, t,"
        " CASE WHEN status IN ('SUCCESS', 'FAILED') THEN t END,"
        " CASE WHEN status = 'FAILED' THEN 'TLS_ERROR' END"
        " FROM (" + rows + ") AS r",
        {"t_end": t_end},
    )


def counts(conn: Any) -> dict[str, int]:
    out = {}
    for table in ("jobs", "executions", "attempts", "execution_logs", "batches"):
        out[table] = int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    return out


def pick_targets(conn: Any, size: int, t_end: datetime) -> dict[str, Any]:
    """The ids and cursors the probe calls: the big cron job, a one-shot job, the newest
    batch, a FAILED execution, the last of the QUEUED backlog, the middle of history."""

    def one(sql: str) -> Any:
        row = conn.execute(sql).fetchone()
        return row[0] if row else None

    middle = t_end - timedelta(seconds=SECONDS_APART * size / 2)
    return {
        "size": size,
        "cron_job": "job_cron000",
        "one_shot_job": "job_o5",
        "batch": one("SELECT batch_id FROM batches ORDER BY created_at DESC LIMIT 1"),
        "failed": one(
            "SELECT execution_id FROM executions WHERE status = 'FAILED'"
            " ORDER BY created_at DESC LIMIT 1"
        ),
        "last_queued": one(
            "SELECT execution_id FROM executions WHERE status = 'QUEUED' AND run_at <= now()"
            " AND endpoint <> 'ep199' ORDER BY run_at DESC, execution_id DESC LIMIT 1"
        ),
        "middle": middle.isoformat(),
        "range": [(middle - timedelta(hours=1)).isoformat(), middle.isoformat()],
    }


def write(results: dict[str, Any], out: Path) -> None:
    """scale.json, and scale.md: a row per call, a column per size, the last / first ratio."""
    sizes = [str(s) for s in results["sizes"]]
    for calls in results["calls"].values():
        first, last = calls.get(sizes[0]), calls.get(sizes[-1])
        if len(sizes) > 1 and first and last and "ms" in first and "ms" in last:
            calls["ratio"] = round(last["ms"] / first["ms"], 2) if first["ms"] else None
    out.mkdir(parents=True, exist_ok=True)
    (out / "scale.json").write_text(json.dumps(results, indent=1) + "\n")
    header = " | ".join(f"{int(s):,}" for s in sizes)
    lines = [
        "# Scale: median latency (ms) by executions of history",
        "",
        f"{results['method']['client']}; median of {results['method']['repeat']} calls after"
        f" {results['method']['warmup']} warm-up calls (generic plans allowed);"
        f" ratio = {int(sizes[-1]):,} / {int(sizes[0]):,}.",
        "",
        f"| call | {header} | ratio |",
        "|---|" + "---:|" * (len(sizes) + 1),
    ]
    for name, calls in results["calls"].items():
        cells = []
        for size in sizes:
            value = calls.get(size, {})
            cells.append(f"{value['ms']:.2f}" if "ms" in value else value.get("error", ""))
        ratio = calls.get("ratio")
        lines.append(f"| `{name}` | {' | '.join(cells)} | {ratio if ratio is not None else ''} |")
    (out / "scale.md").write_text("\n".join(lines) + "\n")


# -- the probes (project venv) -------------------------------------------------------------


def _timer(warmup: int, repeat: int) -> Any:
    def measure(call: Any) -> dict[str, Any]:
        try:
            for _ in range(warmup):
                call()
            times = []
            for _ in range(repeat):
                start = time.perf_counter()
                call()
                times.append(time.perf_counter() - start)
        except Exception as exc:  # one broken call must not hide the others' figures
            return {"error": f"{type(exc).__name__}: {exc}"[:200]}
        return {"ms": round(statistics.median(times) * 1000, 3)}

    return measure


def _cursor(at: str, key: str = "z") -> str:
    from chalicelib.api.pagination import encode_cursor

    return encode_cursor(datetime.fromisoformat(at), key)


def api_calls(t: dict[str, Any]) -> dict[str, str]:
    """name -> path of every read route: each list with each filter, first page and deep
    (the middle of the history). since=…&until=… is the hour before the middle."""
    deep = _cursor(t["middle"])
    since, until = t["range"]
    lists = {
        "/jobs": [
            "",
            "status=ACTIVE",
            "status=RETIRED",
            "trigger=CRON",
            "trigger=IMMEDIATE",
            "trigger=DELAYED",
            "endpoint=ep005",
            "status=ACTIVE&trigger=CRON",
            "status=ACTIVE&trigger=IMMEDIATE",
            "status=ACTIVE&endpoint=ep005",
            "status=RETIRED&endpoint=ep005",
        ],
        "/executions": [
            "",
            *[f"status={s}" for s in ("PENDING", "QUEUED", "RUNNING", "RETRYING")],
            *[f"status={s}" for s in ("SUCCESS", "FAILED", "CANCELLED")],
            "endpoint=ep005",
            "status=FAILED&endpoint=ep005",
            "error_type=HTTP_ERROR",
            "status=FAILED&error_type=HTTP_ERROR",
            "status=FAILED&error_type=TLS_ERROR",
            "status=FAILED&error_type=NEVER_SEEN",
            "since=…&until=…",
            "status=FAILED&since=…&until=…",
        ],
        f"/jobs/{t['cron_job']}/executions": ["", "status=FAILED"],
        "/endpoints": [""],
    }
    paths: dict[str, str] = {}
    for base, filters in lists.items():
        shown = "GET " + base.replace(t["cron_job"], "{cron}")
        for query in filters:
            q = query.replace("since=…&until=…", f"since={since}&until={until}")
            q = q.replace("+", "%2B")
            name = f"{shown}?{query}" if query else shown
            paths[name] = f"{base}?limit=50" + (f"&{q}" if q else "")
            if base != "/endpoints":
                paths[f"{name} (deep)"] = f"{paths[name]}&cursor={deep}"
    singles = {
        "GET /jobs/{cron}": f"/jobs/{t['cron_job']}",
        "GET /jobs/{cron}/status": f"/jobs/{t['cron_job']}/status",
        "GET /jobs/{cron}/versions": f"/jobs/{t['cron_job']}/versions",
        "GET /jobs/{one-shot}": f"/jobs/{t['one_shot_job']}",
        "GET /jobs/{one-shot}/status": f"/jobs/{t['one_shot_job']}/status",
        "GET /batches/{id}": f"/batches/{t['batch']}",
        "GET /batches/{id}/jobs": f"/batches/{t['batch']}/jobs?limit=50",
        "GET /executions/{failed}": f"/executions/{t['failed']}",
        "GET /executions/{failed}/attempts": f"/executions/{t['failed']}/attempts",
        "GET /executions/{failed}/logs": f"/executions/{t['failed']}/logs",
        "GET /executions/{last queued} (queue_position)": f"/executions/{t['last_queued']}",
        "GET /endpoints/{name}": "/endpoints/ep005",
        # The catalogue beside the history (what _catalogue creates): its size does not
        # follow the executions, timed so that every read route is in the table.
        **{
            f"GET /{kind}": f"/{kind}?limit=50" if kind != "keys" else "/keys"
            for kind in ("configs", "secrets", "payload-specs", "keys")
        },
        **{f"GET /{kind}/{{name}}": f"/{kind}/{name}" for kind, name, _ in CATALOGUE},
        "GET /overview": "/overview",
        "GET /metrics": "/metrics",
        "GET /health": "/health",
    }
    return {**paths, **singles}


#: (collection, name, body) of the catalogue entries the probe creates once.
CATALOGUE = (
    ("configs", "scale-config", {"values": {"region": "eu"}}),
    ("secrets", "scale_secret", {"value": "s3cret-for-the-scale-bench"}),
    ("payload-specs", "scale-spec", {"schema": {"type": "object"}}),
)


def _catalogue(client: Any, headers: dict[str, str]) -> None:
    """A config, a secret and a payload spec, created through the API on the first size and
    found (409) on the next ones."""
    for kind, name, body in CATALOGUE:
        reply = client.http.post(
            f"/{kind}",
            headers={**headers, "Content-Type": "application/json"},
            body=json.dumps({"name": name, **body}),
        )
        if reply.status_code not in (201, 409):
            raise RuntimeError(f"POST /{kind}: {reply.status_code}: {reply.body[:200]!r}")


def probe(spec: str) -> None:
    """Time every read route and the claim statement; print one JSON line."""
    from chalice.test import Client

    import app as app_module
    from chalicelib.wiring.api import ApiRoot
    from chalicelib.wiring.process import ProcessRoot

    t = json.loads(spec)
    measure = _timer(t["warmup"], t["repeat"])
    headers = {"Authorization": f"Bearer {os.environ['TE_BOOTSTRAP_API_KEY']}"}
    process = ProcessRoot()
    _settle(process.database("scheduler"), t["size"])
    out: dict[str, Any] = {}
    with Client(app_module.app) as client:
        # The Client applies .chalice/config.json's stage, which is CockroachDB's
        # configuration (production's); on this PostgreSQL the API is served as a PostgreSQL
        # deployment is, from the root built (settings read) before it.
        app_module.app.use(ApiRoot(process))
        _catalogue(client, headers)
        for name, path in api_calls(t).items():
            ok = (200, 503) if path == "/health" else (200,)  # 503: no loop beats here

            def call(path: str = path, ok: tuple[int, ...] = ok) -> None:
                reply = client.http.get(path, headers=headers)
                if reply.status_code not in ok:
                    raise RuntimeError(f"{reply.status_code}: {reply.body[:200]!r}")

            out[name] = measure(call)
            _say(f"scale {t['size']}: {name}: {out[name]}")
    worker_db = process.database("worker")
    out["claim statement (rolled back)"] = measure(_claim_call(worker_db))
    _say(f"scale {t['size']}: claim: {out['claim statement (rolled back)']}")
    # ep000 holds the big cron job's backlog, the oldest due rows: at its cap, the claim
    # takes every other endpoint's oldest instead.
    capped = "claim statement, ep000 at its cap (rolled back)"
    out[capped] = measure(_claim_call(worker_db, capped="ep000"))
    _say(f"scale {t['size']}: claim, ep000 at its cap: {out[capped]}")
    print(json.dumps(out))


def _settle(db: Any, size: int) -> None:
    """What the delayed promoter leaves behind in a running deployment, and nothing else
    (it would promote too): the paused endpoint's backlog parked, page by page, and the
    waiting work counted into live_counts."""
    from chalicelib.db.queries import queries
    from chalicelib.scheduler.promoter import PARK_HOLDS_OVER, PARK_PAGE, recount_live

    hold_ms = int(PARK_HOLDS_OVER.total_seconds() * 1000)
    parked = 0
    while True:
        n = int(
            db.transaction(
                lambda tx: tx.scalar(queries["scheduler_park"], page=PARK_PAGE, hold_ms=hold_ms)
            )
        )
        parked += n
        if n < PARK_PAGE:
            break
    recount_live(db)
    _say(f"scale {size}: {parked:,} executions parked, live counts written")


class _Rollback(Exception):
    pass


def _claim_call(db: Any, capped: str | None = None) -> Any:
    """The worker's claim as the worker runs it, 50 slots, in a transaction rolled back:
    the statement its limits call for (``capped``: that endpoint delivers its share here, so
    the claim takes the other endpoints' oldest rows instead of walking the due index past
    its backlog: worker_claim_skip_locked_capped)."""
    sys.path.insert(0, str(BENCH))
    from ours_inproc import _claim_query

    from chalicelib.worker.strategies import ClaimLimits, run_shaped

    _, claim = _claim_query(capped is not None)
    share = 25
    limits = ClaimLimits(
        default_cap=share,
        full=(capped,) if capped else (),
        busy={capped: share} if capped else {},
    )
    params = {"worker_id": "bench-probe", "batch": 50, **limits.params()}

    def call() -> None:
        def work(tx: Any) -> None:
            run_shaped(tx, claim, **params)
            raise _Rollback

        with contextlib.suppress(_Rollback):
            db.transaction(work, name="bench_claim_probe")

    return call


def loops(spec: str) -> None:
    """One pass of each background loop, timed like the routes; print one JSON line."""
    from chalicelib.domain.clock import utcnow
    from chalicelib.domain.regions import ALL_REGIONS
    from chalicelib.scheduler.housekeeper import Housekeeper
    from chalicelib.scheduler.names import (
        CRON_MATERIALIZER,
        DELAYED_PROMOTER,
        HOUSEKEEPER,
        STUCK_RECLAIMER,
    )
    from chalicelib.scheduler.promoter import recount_live
    from chalicelib.wiring.process import ProcessRoot
    from chalicelib.wiring.scheduler import build_loop

    t = json.loads(spec)
    measure = _timer(t["warmup"], t["repeat"])
    process = ProcessRoot()
    db = process.database("scheduler")
    out: dict[str, Any] = {}
    _settle(db, t["size"])
    for name in (CRON_MATERIALIZER, DELAYED_PROMOTER, STUCK_RECLAIMER, HOUSEKEEPER):
        if name == HOUSEKEEPER:
            _expired_pages(db, t["warmup"] + t["repeat"])
        loop = build_loop(name, process.settings, db, utcnow, lambda: ALL_REGIONS)
        out[f"loop pass: {name}"] = measure(loop.iteration)
        _say(f"scale {t['size']}: loop {name}: {out[f'loop pass: {name}']}")
    # Its pass with nothing to purge, too (retention 0: purging off).
    keeper = Housekeeper(db, retention_days=0)
    out["loop pass: housekeeper (nothing to purge)"] = measure(keeper.run_once)
    # The promoter recounts the waiting work every 15 s: it reads the live backlog (scaled
    # with the size here), never history.
    out["live count (promoter, every 15 s)"] = measure(lambda: recount_live(db))
    print(json.dumps(out))


def _expired_pages(db: Any, passes: int) -> None:
    """A page of expired history for every housekeeper pass to purge, the same at every size
    (on the loops' copy of the database): ``passes`` pages of one-shot jobs and as many of
    cron ticks, each execution SUCCESS with an attempt and two log lines, a year older than
    anything else, so each pass purges one full page of each kind and, with the loops'
    retention longer than the history (LOOPS_RETENTION), only those: a ratio between sizes
    then measures what the history costs the same purge, not how full or how scattered its
    page is."""
    from chalicelib.scheduler.housekeeper import PURGE_BATCH

    rows = passes * PURGE_BATCH
    block = (
        "SELECT g, now() - INTERVAL '400 days' - g * INTERVAL '1 second' AS t,"
        " CASE WHEN g % 2 = 0 THEN 'one' ELSE 'cron' END AS kind"
        " FROM generate_series(1, :n) AS g"
    )
    db.run(
        "INSERT INTO jobs (job_id, endpoint, endpoint_type, trigger_type, created_at)"
        f" SELECT 'job_x' || g, 'ep010', 'HTTP', 'IMMEDIATE', t FROM ({block}) AS b"
        " WHERE kind = 'one'",
        n=2 * rows,
    )
    db.run(
        "INSERT INTO executions (execution_id, job_id, endpoint, endpoint_type,"
        " idempotency_key, status, input, output, attempt_count, max_attempts, run_at,"
        " started_at, completed_at, duration_ms, created_at)"
        " SELECT 'exec_x' || g, CASE WHEN kind = 'one' THEN 'job_x' || g ELSE 'job_cron010'"
        " END, 'ep010', 'HTTP', CASE WHEN kind = 'cron' THEN 'tick:x' || g END, 'SUCCESS',"
        " jsonb_build_object('n', g), CAST('{\"ok\": true}' AS JSONB), 1, 3, t, t,"
        f" t + INTERVAL '200 ms', 200, t FROM ({block}) AS b",
        n=2 * rows,
    )
    db.run(
        "INSERT INTO attempts (execution_id, attempt_number, status, started_at, completed_at,"
        " duration_ms, output)"
        " SELECT 'exec_x' || g, 1, 'SUCCESS', t, t + INTERVAL '100 ms', 100,"
        f" CAST('{{\"ok\": true}}' AS JSONB) FROM ({block}) AS b",
        n=2 * rows,
    )
    db.run(
        "INSERT INTO execution_logs (execution_id, attempt_number, level, message, logged_at)"
        " SELECT 'exec_x' || g, a, 'INFO', 'seeded', t"
        f" FROM ({block}) AS b, generate_series(0, 1) AS a",
        n=2 * rows,
    )
    db.run("ANALYZE")


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "probe":
        probe(sys.argv[2])
    elif len(sys.argv) > 2 and sys.argv[1] == "loops":
        loops(sys.argv[2])
    else:
        main()
