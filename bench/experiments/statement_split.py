"""Where the database's work per delivery goes, statement by statement.

Runs workload 1 once (N seeded IMMEDIATE executions, WORKERS worker processes, default 1;
default settings) and prints, for each statement the workers sent, per delivered job: calls,
execution time, WAL bytes and records, buffers dirtied (pg_stat_statements, reset at the
run's start).
Execution time is wall time inside the server (noisy on a shared machine); WAL bytes and
records are exact.

Usage (bench venv): python bench/experiments/statement_split.py [N] [WORKERS]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ours
from pgserver import PgServer
from sink import Sink

SPLIT_SQL = """
SELECT calls, total_exec_time, wal_bytes, wal_records, shared_blks_dirtied,
       regexp_replace(left(query, 70), '\\s+', ' ', 'g')
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND userid <> (SELECT oid FROM pg_roles WHERE rolname = 'bench_harness')
ORDER BY total_exec_time DESC
"""


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    server, sink = PgServer(), Sink()
    server.start()
    sink.start()
    try:
        workers = int(sys.argv[2]) if len(sys.argv) > 2 else 1
        result = ours.run_throughput(server, sink.url, n, workers)
        delivered = result["success"]
        with server.connect(f"bench_ours_{workers}w", harness=True) as conn:
            rows = conn.execute(SPLIT_SQL).fetchall()
        print(f"{delivered} delivered, {result['per_s']:.0f}/s; per delivered job:")
        print(f"{'calls':>7} {'exec us':>8} {'WAL B':>7} {'WAL rec':>7} {'dirtied':>7}  statement")
        for calls, ms, wal, recs, dirtied, text in rows:
            print(
                f"{calls / delivered:7.3f} {ms * 1000 / delivered:8.1f} "
                f"{float(wal) / delivered:7.0f} {recs / delivered:7.2f} "
                f"{dirtied / delivered:7.3f}  {text}"
            )
    finally:
        sink.stop()
        server.stop()


if __name__ == "__main__":
    main()
