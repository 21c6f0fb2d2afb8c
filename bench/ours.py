"""Our service under test: database preparation, seeding, and worker/API/scheduler processes.

Everything here talks to the code under test only through its public surfaces: the
migrations, ``python -m chalicelib.worker`` / ``chalicelib.scheduler`` / ``chalicelib.local``,
the HTTP API, and ``bench/ours_inproc.py`` (run with the project's venv).
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import jobcost
import psutil
from common import BENCH, PROJECT_PY, ROOT, WORK, free_port, progress, run_json
from pgserver import PgServer

API_KEY = "te_bench_" + base64.urlsafe_b64encode(os.urandom(18)).decode()
ENC_KEY = base64.b64encode(os.urandom(32)).decode()
ENDPOINT = "bench-sink"
TERMINAL = "('SUCCESS', 'FAILED', 'CANCELLED')"


class Missing(Exception):
    """A piece of the service this workload needs does not exist yet."""


def require_module(dotted: str) -> None:
    path = ROOT / Path(*dotted.split(".")) / "__main__.py"
    if not path.exists():
        raise Missing(f"`python -m {dotted}` does not exist yet ({path.relative_to(ROOT)})")


def project_env(url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TE_")}
    env.update(
        TE_DATABASE_URL=url,
        TE_ALLOW_PRIVATE_TARGETS="true",
        TE_BOOTSTRAP_API_KEY=API_KEY,
        TE_SECRET_ENCRYPTION_KEY=ENC_KEY,
        TE_LOG_LEVEL="WARNING",
        TE_DATA_DIR=str(WORK / "te-data"),
        PYTHONPATH=str(ROOT),
    )
    env.update(extra)
    return env


def prepare_db(server: PgServer, name: str) -> str:
    """A fresh SERIALIZABLE database (as the service runs) with our migrations applied."""
    url = server.recreate(name, serializable=True)
    proc = subprocess.run(
        [str(PROJECT_PY), "-m", "chalicelib.migrate"],
        env=project_env(url),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"migrations failed: {proc.stderr[-1500:]}")
    return url


def endpoint_spec(sink_url: str, timeout_ms: int = 5000, **more: Any) -> dict[str, Any]:
    return more | {
        "url": sink_url,
        "method": "POST",
        "headers": {"Content-Type": "application/json"},
        "body_template": {"n": "{{input.n}}"},
        "timeout_ms": timeout_ms,
        "expected_status_codes": [200],
    }


RETRY = {
    "max_attempts": 3,
    "backoff": "exponential",
    "initial_delay_ms": 1000,
    "max_delay_ms": 30000,
}


def seed_endpoint_sql(conn: Any, sink_url: str, name: str = ENDPOINT, **spec: Any) -> None:
    conn.execute(
        "INSERT INTO endpoints (name, endpoint_type, spec, retry_policy)"
        " VALUES (%s, 'HTTP', %s::jsonb, %s::jsonb)",
        (name, json.dumps(endpoint_spec(sink_url, **spec)), json.dumps(RETRY)),
    )


def snapshot(sink_url: str, name: str = ENDPOINT, **spec: Any) -> str:
    return json.dumps(
        {
            "name": name,
            "type": "HTTP",
            "spec": endpoint_spec(sink_url, **spec),
            "retry_policy": RETRY,
            "config_ref": None,
            "payload_spec_ref": None,
        }
    )


#: Whether seeded executions carry their job's idempotency key, as POST /jobs wrote them
#: before 2026-11-26 (now only the job holds it: chalicelib/services/jobs/rows.py,
#: ExecutionRow); worker_ab.py sets it for a checkout from before then.
EXECUTION_KEYS = False


def seed_immediate_sql(
    conn: Any, sink_url: str, n: int, name: str = ENDPOINT, **spec: Any
) -> list[tuple[str, float]]:
    """N IMMEDIATE jobs with one QUEUED execution each (what POST /jobs writes), by SQL;
    returns (execution id, run_at as a UNIX time) of each."""
    rows = conn.execute(
        """
        WITH j AS (
            INSERT INTO jobs (endpoint, endpoint_type, trigger_type, idempotency_key, input,
                              endpoint_snapshot)
            SELECT %(ep)s, 'HTTP', 'IMMEDIATE', %(ep)s || '-' || g, jsonb_build_object('n', g),
                   %(snap)s::jsonb
            FROM generate_series(1, %(n)s::int) g
            RETURNING job_id, idempotency_key, input
        ), e AS (
            INSERT INTO executions (job_id, endpoint, endpoint_type, idempotency_key, status,
                                    input, max_attempts, run_at)
            SELECT job_id, %(ep)s, 'HTTP', CASE WHEN %(keys)s THEN idempotency_key END,
                   'QUEUED', input, 3, now()
            FROM j
            RETURNING execution_id, run_at
        ), logged AS (
            INSERT INTO execution_logs (execution_id, attempt_number, level, message)
            SELECT execution_id, 0, 'INFO', 'Execution created (QUEUED).' FROM e
        )
        SELECT execution_id, extract(epoch FROM run_at) FROM e
        """,
        {"ep": name, "snap": snapshot(sink_url, name, **spec), "n": n, "keys": EXECUTION_KEYS},
    ).fetchall()
    conn.execute("ANALYZE")
    return [(str(eid), float(at)) for eid, at in rows]


def seed_keyed_sql(conn: Any, sink_url: str, n: int, keys: int, name: str = ENDPOINT) -> None:
    """N IMMEDIATE jobs as seed_immediate_sql writes them, spread over ``keys`` ordering
    keys (job g to key g mod keys, so the keys interleave), each key's first execution its
    head and the others waiting behind it in creation order, as POST /jobs writes keyed
    jobs (their keys' lock rows are written on first use)."""
    conn.execute(
        """
        WITH j AS (
            INSERT INTO jobs (endpoint, endpoint_type, trigger_type, idempotency_key, input,
                              endpoint_snapshot, ordering_key)
            SELECT %(ep)s, 'HTTP', 'IMMEDIATE', %(ep)s || '-' || g, jsonb_build_object('n', g),
                   %(snap)s::jsonb, 'key-' || ((g - 1) %% %(k)s)
            FROM generate_series(1, %(n)s::int) g
            RETURNING job_id, input, ordering_key
        ), e AS (
            INSERT INTO executions (job_id, endpoint, endpoint_type, status, input,
                                    max_attempts, run_at, ordering_key, ordering_wait,
                                    ordering_at, ordering_seq)
            SELECT job_id, %(ep)s, 'HTTP', 'QUEUED', input, 3, now(), ordering_key,
                   CAST(input ->> 'n' AS INT) > %(k)s, now(), CAST(input ->> 'n' AS INT)
            FROM j
            RETURNING execution_id
        )
        INSERT INTO execution_logs (execution_id, attempt_number, level, message)
        SELECT execution_id, 0, 'INFO', 'Execution created (QUEUED).' FROM e
        """,
        {"ep": name, "snap": snapshot(sink_url, name), "n": n, "k": keys},
    )
    conn.execute("ANALYZE")


def spread_names(count: int) -> list[str]:
    """The endpoints of the spread variant: bench-sink-01 .. bench-sink-NN."""
    return [f"{ENDPOINT}-{i + 1:02d}" for i in range(count)]


def seed_spread_sql(conn: Any, sink_url: str, n: int, names: list[str], **spec: Any) -> None:
    """N IMMEDIATE jobs as seed_immediate_sql writes them, spread evenly over ``names`` (job g
    to endpoint g mod len(names)), in one statement, so all are due at the same instant and
    the endpoints' rows interleave; each snapshot names its own endpoint."""
    conn.execute(
        """
        WITH j AS (
            INSERT INTO jobs (endpoint, endpoint_type, trigger_type, idempotency_key, input,
                              endpoint_snapshot)
            SELECT ep, 'HTTP', 'IMMEDIATE', ep || '-' || g, jsonb_build_object('n', g),
                   jsonb_set(%(snap)s::jsonb, '{name}', to_jsonb(ep))
            FROM generate_series(1, %(n)s::int) g,
                 LATERAL (SELECT (%(names)s::text[])[1 + (g - 1) %% %(k)s]) AS pick(ep)
            RETURNING job_id, endpoint, idempotency_key, input
        ), e AS (
            INSERT INTO executions (job_id, endpoint, endpoint_type, idempotency_key, status,
                                    input, max_attempts, run_at)
            SELECT job_id, endpoint, 'HTTP', CASE WHEN %(keys)s THEN idempotency_key END,
                   'QUEUED', input, 3, now()
            FROM j
            RETURNING execution_id
        )
        INSERT INTO execution_logs (execution_id, attempt_number, level, message)
        SELECT execution_id, 0, 'INFO', 'Execution created (QUEUED).' FROM e
        """,
        {
            "snap": snapshot(sink_url, **spec),
            "n": n,
            "names": names,
            "k": len(names),
            "keys": EXECUTION_KEYS,
        },
    )
    conn.execute("ANALYZE")


class Procs:
    """Child processes of one workload; stopped with SIGTERM (then SIGKILL) by pid."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []

    def start(self, name: str, args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        log = WORK / "logs" / f"{name}-{os.getpid()}-{len(self.procs)}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("wb") as out:
            proc = subprocess.Popen(args, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        self.logs.append(log)
        return proc

    def check_alive(self) -> None:
        for proc, log in zip(self.procs, self.logs, strict=True):
            if proc.poll() is not None:
                tail = log.read_text(errors="replace")[-1500:]
                raise RuntimeError(f"{log.name} exited with {proc.returncode}:\n{tail}")

    def rss_bytes(self) -> int:
        total = 0
        for proc in self.procs:
            with contextlib.suppress(psutil.Error):
                total = max(total, psutil.Process(proc.pid).memory_info().rss)
        return total

    def cpu_seconds(self) -> float:
        """User + system CPU consumed so far by the (still running) processes."""
        total = 0.0
        for proc in self.procs:
            with contextlib.suppress(psutil.Error):
                times = psutil.Process(proc.pid).cpu_times()
                total += times.user + times.system
        return total

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 40
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()


def start_workers(procs: Procs, url: str, count: int, **extra: str) -> None:
    require_module("chalicelib.worker")
    for _ in range(count):
        procs.start(
            "worker", [str(PROJECT_PY), "-m", "chalicelib.worker"], project_env(url, **extra)
        )


def wait_terminal(conn: Any, n: int, procs: Procs, label: str, stall_s: float = 60) -> float:
    """Poll until n executions are terminal; returns the peak worker RSS seen (bytes)."""
    last_done, last_change, last_print, peak = -1, time.monotonic(), 0.0, 0
    while True:
        done = conn.execute(
            f"SELECT count(*) FROM executions WHERE status IN {TERMINAL}"
        ).fetchone()[0]
        peak = max(peak, procs.rss_bytes())
        now = time.monotonic()
        if done != last_done:
            last_done, last_change = done, now
        if done >= n:
            return peak
        if now - last_print > 5:
            progress(f"  {label}: {done}/{n} terminal")
            last_print = now
        if now - last_change > stall_s:
            raise RuntimeError(f"{label}: no progress for {stall_s}s at {done}/{n}")
        procs.check_alive()
        time.sleep(0.25)


def wait_connected(conn: Any, procs: Procs, count: int, timeout_s: float = 60) -> float:
    """Poll (every 5 ms) until the system under test holds ``count`` connections to this
    database; returns its processes' CPU then: interpreter start-up and imports, which the
    per-job worker CPU leaves out (PgQueuer's is measured from its connect on). With two
    workers the cut is when two connections are open, which one worker may reach alone."""
    deadline = time.monotonic() + timeout_s
    while conn.execute(jobcost.CLIENTS_SQL).fetchone()[0] < count:
        procs.check_alive()
        if time.monotonic() > deadline:
            raise RuntimeError(f"the worker did not connect within {timeout_s}s")
        time.sleep(0.005)
    return procs.cpu_seconds()


class CostWindow:
    """Statements and PostgreSQL CPU of the system under test over a window, through the
    harness's own connection (role bench_harness, left out of both)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.cpu = jobcost.CpuWindow(conn.execute(jobcost.BACKEND_PID_SQL).fetchone()[0])
        self.dealloc0 = 0

    def start(self) -> None:
        self.dealloc0 = self.conn.execute(jobcost.DEALLOC_SQL).fetchone()[0]
        self.conn.execute(jobcost.RESET_SQL)
        self.cpu.start()

    def stop(self) -> dict[str, Any]:
        result: dict[str, Any] = dict(self.cpu.stop())
        rows = self.conn.execute(jobcost.STATEMENTS_SQL).fetchall()
        dealloc = self.conn.execute(jobcost.DEALLOC_SQL).fetchone()[0] - self.dealloc0
        result.update(jobcost.statements(rows, dealloc))
        return result


COUNTERS_SQL = (
    "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, xact_commit"
    " FROM pg_stat_database WHERE datname = current_database()"
)


def db_counters(conn: Any) -> tuple[int, int]:
    """(WAL position, committed transactions) of this database, after stats are flushed."""
    time.sleep(1.2)  # backends flush their statistics at most once a second
    wal, commits = conn.execute(COUNTERS_SQL).fetchone()
    return int(wal), int(commits)


def per_delivery(before: tuple[int, int], after: tuple[int, int], n: int) -> dict[str, Any]:
    """Commits and WAL bytes per delivered execution (includes the harness's polls, ~4/s)."""
    return {
        "commits_per_delivery": (after[1] - before[1]) / n if n else None,
        "wal_bytes_per_delivery": (after[0] - before[0]) / n if n else None,
    }


def window_stats(conn: Any) -> dict[str, Any]:
    row = conn.execute(
        f"""SELECT count(*) FILTER (WHERE status = 'SUCCESS'),
                  count(*) FILTER (WHERE status IN {TERMINAL}),
                  EXTRACT(EPOCH FROM max(completed_at) - min(started_at)),
                  (SELECT count(*) FROM attempts), (SELECT count(*) FROM execution_logs)
           FROM executions"""
    ).fetchone()
    success, terminal, window, attempts, logs = row
    window = float(window or 0)
    return {
        "success": success,
        "terminal": terminal,
        "db_window_s": window,
        "attempts": attempts,
        "log_rows": logs,
        "per_s": success / window if window > 0 else None,
    }


def run_throughput(
    server: PgServer,
    sink_url: str,
    n: int,
    workers: int,
    endpoints: int = 1,
    env: dict[str, str] | None = None,
    ordering_keys: int = 0,
    **spec: Any,
) -> dict[str, Any]:
    """Workload 1: N seeded IMMEDIATE executions, `workers` worker processes; ``endpoints``
    > 1: the N spread evenly over that many endpoints, all with the same sink URL;
    ``ordering_keys`` > 0: the N spread over that many ordering keys of one endpoint;
    ``env``: more settings of the worker processes (e.g. CockroachDB's claim strategy);
    ``spec``: more fields of the endpoints' definition (e.g. ``max_concurrent``).

    Besides the rate, the work per delivered job (bench/jobcost.py): client statements and
    PostgreSQL CPU from the workers' start to their exit, WAL bytes, worker CPU."""
    require_module("chalicelib.worker")
    name = f"bench_ours_{workers}w"
    url = prepare_db(server, name)
    with server.connect(name, harness=True) as conn:
        if endpoints > 1:
            names = spread_names(endpoints)
            for endpoint in names:
                seed_endpoint_sql(conn, sink_url, endpoint, **spec)
            seed_spread_sql(conn, sink_url, n, names, **spec)
        elif ordering_keys:
            seed_endpoint_sql(conn, sink_url, **spec)
            seed_keyed_sql(conn, sink_url, n, ordering_keys)
        else:
            seed_endpoint_sql(conn, sink_url, **spec)
            seed_immediate_sql(conn, sink_url, n, **spec)
        before = db_counters(conn)
        window = CostWindow(conn)
        procs = Procs()
        window.start()
        try:
            start_workers(procs, url, workers, **(env or {}))
            startup = wait_connected(conn, procs, workers)
            peak = wait_terminal(conn, n, procs, f"ours x{workers}")
            cpu = procs.cpu_seconds()
        finally:
            procs.stop()
        cost = window.stop()
        result = window_stats(conn)
        result.update(per_delivery(before, db_counters(conn), result["success"]))
    result.update(cost)
    result.update(
        system=f"ours_{workers}w",
        n=n,
        workers=workers,
        endpoints=endpoints,
        peak_rss_mb=peak / 2**20,
        worker_cpu_s=cpu,
        worker_startup_cpu_s=startup,
        worker_cpu_window_s=cpu - startup,
    )
    result["per_job"] = jobcost.per_job(result, result["success"])
    server.wait_idle(name)
    pj = result["per_job"]
    progress(
        f"ours x{workers}{f' over {endpoints} endpoints' if endpoints > 1 else ''}: "
        f"{result['success']} delivered, {result['per_s'] or 0:.0f}/s, "
        f"{result['attempts']} attempts recorded; per job {_fmt(pj['statements'], '.3g')} "
        f"statements, PostgreSQL {_fmt(pj['pg_cpu_us'])} µs, WAL {_fmt(pj['wal_bytes'])} B, "
        f"worker {_fmt(pj['worker_cpu_us'])} µs"
    )
    return result


def _fmt(value: float | None, spec: str = ".0f") -> str:
    return "n/a" if value is None else format(value, spec)


class Api:
    """A minimal HTTP client for the API (one keep-alive connection per instance)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn: http.client.HTTPConnection | None = None

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        payload = None if body is None else json.dumps(body)
        headers = {"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"}
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            try:
                self.conn.request(method, path, body=payload, headers=headers)
                resp = self.conn.getresponse()
                raw = resp.read()
                if resp.getheader("Connection", "").lower() == "close":
                    self.conn.close()
                    self.conn = None
                return resp.status, json.loads(raw) if raw else None
            except (OSError, http.client.HTTPException):
                self.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")


def start_api(procs: Procs, url: str, *, stack: bool, **extra: str) -> Api:
    """API server: the local stack (API + worker + scheduler in one process) or API alone."""
    port = free_port()
    if stack:
        procs.start(
            "local",
            [str(PROJECT_PY), "-m", "chalicelib.local"],
            project_env(url, TE_LISTEN_ADDR=f"127.0.0.1:{port}", **extra),
        )
    else:
        procs.start(
            "api",
            [str(PROJECT_PY), str(BENCH / "ours_inproc.py"), "serve-api", "127.0.0.1", str(port)],
            project_env(url, **extra),
        )
    api = Api(port)
    for _ in range(200):
        procs.check_alive()
        try:
            status, _ = api.call("GET", "/openapi.json")
            if status == 200:
                return api
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError("API server did not answer GET /openapi.json")


def create_endpoint(api: Api, sink_url: str) -> None:
    status, body = api.call(
        "POST",
        "/endpoints",
        {
            "name": ENDPOINT,
            "type": "HTTP",
            "spec": endpoint_spec(sink_url),
            "retry_policy": RETRY,
        },
    )
    if status not in (200, 201):
        raise RuntimeError(f"POST /endpoints answered {status}: {body}")


def post_job(api: Api, body: dict[str, Any]) -> dict[str, Any]:
    status, reply = api.call("POST", "/jobs", body)
    if status == 404:
        raise Missing(f"POST /jobs answered 404 ({reply})")
    if status not in (200, 201):
        raise RuntimeError(f"POST /jobs answered {status}: {reply}")
    return reply


def inproc_rate(url: str, n: int) -> dict[str, Any]:
    return run_json(
        [str(PROJECT_PY), str(BENCH / "ours_inproc.py"), "inproc-api", str(n)],
        env=project_env(url),
        timeout=600,
    )
