"""Workloads 4-10: latency, delayed and cron precision, scale, API rates, serverless
fitness and memory. Each returns a dict for the results file."""

from __future__ import annotations

import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import ours
from common import (
    BENCH,
    BENCH_PY,
    PROJECT_PY,
    WORK,
    free_port,
    progress,
    run_json,
    summary_ms,
)
from ours import Api, Procs
from pgserver import PgServer
from sink import Sink


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _Clients:
    """One keep-alive API client per thread."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.local = threading.local()

    def get(self) -> Api:
        if not hasattr(self.local, "api"):
            self.local.api = Api(self.port)
        return self.local.api


def collect(sink: Sink, mark: int, want: set[str], timeout: float) -> dict[str, float]:
    deadline = time.monotonic() + timeout
    while True:
        got = {ident: ts for ts, ident in sink.read_since(mark) if ident in want}
        if len(got) >= len(want) or time.monotonic() > deadline:
            return got
        time.sleep(0.5)


def latency(
    server: PgServer, sink: Sink, seconds: float, *, stack: bool, poll_only: bool = False
) -> dict[str, Any]:
    """Workload 4: one IMMEDIATE job every 20 ms through the HTTP API, idle running worker.

    ``poll_only`` turns the cross-process wake-up off (TE_WAKEUP_NOTIFY=off), which is how
    the worker behaves on CockroachDB."""
    url = ours.prepare_db(server, "bench_latency")
    extra = {"TE_WAKEUP_NOTIFY": "off"} if poll_only else {}
    procs = Procs()
    try:
        api = ours.start_api(procs, url, stack=stack, **extra)
        if not stack:
            ours.start_workers(procs, url, 1, **extra)
        ours.create_endpoint(api, sink.url)
        time.sleep(2)
        mark = sink.mark()
        clients, sent = _Clients(api.port), {}
        count = int(seconds / 0.02)

        def fire(i: int) -> None:
            t = time.time()
            reply = ours.post_job(
                clients.get(),
                {
                    "endpoint": ours.ENDPOINT,
                    "trigger": "IMMEDIATE",
                    "idempotency_key": f"lat-{i}",
                    "input": {"n": i},
                },
            )
            sent[reply["execution"]["execution_id"]] = t

        start = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            futures = []
            for i in range(count):
                delay = start + i * 0.02 - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                futures.append(pool.submit(fire, i))
            for f in futures:
                f.result()
        received = collect(sink, mark, set(sent), 30)
    finally:
        procs.stop()
    lat = [received[k] - sent[k] for k in sent if k in received]
    out = {
        "topology": _topology(stack, poll_only),
        "sent": len(sent),
        "delivered": len(received),
        **summary_ms(lat),
        "samples_ms": [round(x * 1000, 1) for x in lat],
    }
    progress(f"latency ({out['topology']}): p50 {out['p50_ms']:.1f} ms, p99 {out['p99_ms']:.1f} ms")
    return out


def pgqueuer_latency(server: PgServer, sink: Sink, seconds: float) -> dict[str, Any]:
    """Workload 4's reference: PgQueuer's enqueue -> its handler's request at the sink, one
    job every 20 ms, its queue manager running (LISTEN/NOTIFY, the throughput run's batch
    and concurrency), on the same server and sink, in the same run as ours."""
    url = server.recreate("bench_pgqueuer_latency")
    mark = sink.mark()
    result = run_json(
        [str(BENCH_PY), str(BENCH / "peer_pgqueuer.py"), "latency", url, sink.url, str(seconds)],
        timeout=seconds + 120,
    )
    sent: dict[str, float] = result["sent"]
    received = collect(sink, mark, set(sent), 30)
    lat = [received[k] - sent[k] for k in sent if k in received]
    out = {
        "topology": "PgQueuer: enqueue -> handler (LISTEN/NOTIFY)",
        "sent": len(sent),
        "delivered": len(received),
        **summary_ms(lat),
        "samples_ms": [round(x * 1000, 1) for x in lat],
    }
    progress(f"latency (PgQueuer): p50 {out['p50_ms']:.1f} ms, p99 {out['p99_ms']:.1f} ms")
    return out


def _topology(stack: bool, poll_only: bool) -> str:
    if stack:
        return "local stack (in-process nudge)"
    return "API + separate worker (" + ("poll only)" if poll_only else "NOTIFY wake-up)")


def _stack_with_scheduler(server: PgServer, sink: Sink, db: str) -> tuple[str, Procs, Api]:
    ours.require_module("chalicelib.worker")
    ours.require_module("chalicelib.scheduler")
    url = ours.prepare_db(server, db)
    procs = Procs()
    try:
        api = ours.start_api(procs, url, stack=False)
        ours.start_workers(procs, url, 1)
        procs.start(
            "scheduler", [str(PROJECT_PY), "-m", "chalicelib.scheduler"], ours.project_env(url)
        )
        ours.create_endpoint(api, sink.url)
    except BaseException:
        procs.stop()
        raise
    return url, procs, api


def delayed(server: PgServer, sink: Sink, count: int, spread: float) -> dict[str, Any]:
    """Workload 5: DELAYED jobs spread over `spread` seconds; lateness = receive - run_at."""
    _, procs, api = _stack_with_scheduler(server, sink, "bench_delayed")
    try:
        mark = sink.mark()
        lead = 10.0 + count / 25  # creating the jobs must finish before the first is due
        t0 = time.time() + lead
        clients, due = _Clients(api.port), {}

        def create(i: int) -> None:
            run_at = round(t0 + i * spread / count, 3)
            reply = ours.post_job(
                clients.get(),
                {
                    "endpoint": ours.ENDPOINT,
                    "trigger": "DELAYED",
                    "idempotency_key": f"d-{i}",
                    "run_at": _iso(run_at),
                    "input": {"n": i},
                },
            )
            due[reply["execution"]["execution_id"]] = run_at

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(create, range(count)))
        if time.time() > t0:
            progress("  warning: creating the DELAYED jobs took longer than the lead time")
        progress(f"  {count} DELAYED jobs created; waiting {spread + lead:.0f}s")
        time.sleep(max(0.0, t0 + spread - time.time()))
        received = collect(sink, mark, set(due), 30)
        unseen = sorted(set(due) - set(received))
        missing = _statuses(server, "bench_delayed", unseen)
        missing["unseen_ids"] = unseen[:20]  # type: ignore[assignment]
    finally:
        procs.stop()
    late = [received[k] - due[k] for k in due if k in received]
    out = {
        "jobs": count,
        "spread_s": spread,
        "delivered": len(received),
        "undelivered_by_status": missing,
        **summary_ms(late),
        "samples_ms": [round(x * 1000, 1) for x in late],
    }
    progress(
        f"delayed: p50 {out['p50_ms']:.0f} ms, p99 {out['p99_ms']:.0f} ms, "
        f"max {out['max_ms']:.0f} ms late"
    )
    return out


def _statuses(server: PgServer, db: str, ids: list[str]) -> dict[str, int]:
    """Status counts of executions the sink never saw (why a delivery is missing)."""
    if not ids:
        return {}
    with server.connect(db) as conn:
        rows = conn.execute(
            "SELECT status, count(*) FROM executions WHERE execution_id = ANY(%s) GROUP BY 1",
            (ids,),
        ).fetchall()
    return {status: count for status, count in rows}


def cron(server: PgServer, sink: Sink, jobs: int, ticks: int) -> dict[str, Any]:
    """Workload 6: `jobs` cron jobs every minute for `ticks` ticks; lateness per tick."""
    _, procs, api = _stack_with_scheduler(server, sink, "bench_cron")
    try:
        mark = sink.mark()
        clients = _Clients(api.port)

        def create(i: int) -> None:
            ours.post_job(
                clients.get(),
                {
                    "endpoint": ours.ENDPOINT,
                    "trigger": "CRON",
                    "cron": "* * * * *",
                    "timezone": "UTC",
                    "input": {"n": i},
                },
            )

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(create, range(jobs)))
        now = time.time()
        end = (now // 60 + ticks) * 60 + 1
        progress(f"  {jobs} cron jobs created; waiting {end - now + 10:.0f}s for {ticks} tick(s)")
        time.sleep(end - now + 10)
        rows = sink.read_since(mark)
        with server.connect("bench_cron") as conn:
            run_at = {
                r[0]: r[1].timestamp()
                for r in conn.execute("SELECT execution_id, run_at FROM executions").fetchall()
            }
    finally:
        procs.stop()
    per_tick: dict[float, list[float]] = {}
    for ts, ident in rows:
        if ident in run_at:
            per_tick.setdefault(run_at[ident], []).append(ts - run_at[ident])
    ticks_out = [
        {"tick": _iso(t), "fired": len(v), **summary_ms(v)} for t, v in sorted(per_tick.items())
    ]
    allv = [x for v in per_tick.values() for x in v]
    out = {
        "jobs": jobs,
        "ticks": ticks_out,
        "overall": summary_ms(allv),
        "samples_ms": [round(x * 1000, 1) for x in allv],
    }
    progress(
        f"cron: {len(allv)} fires over {len(ticks_out)} tick(s), "
        f"p50 {out['overall']['p50_ms'] or 0:.0f} ms, p99 {out['overall']['p99_ms'] or 0:.0f} ms"
    )
    return out


def scale(server: PgServer, sizes: list[int], due: int = 200) -> dict[str, Any]:
    """Workload 7: claim-query and list-page time at growing terminal history."""
    url = ours.prepare_db(server, "bench_scale")
    have = 0
    points = []
    with server.connect("bench_scale") as conn:
        ours.seed_endpoint_sql(conn, "http://127.0.0.1:9/unused")
        job_id = conn.execute(
            "INSERT INTO jobs (endpoint, endpoint_type, trigger_type, cron_expression,"
            " cron_timezone, cron_next_run_at, endpoint_snapshot) VALUES (%s, 'HTTP', 'CRON',"
            " '* * * * *', 'UTC', now() + interval '1 day', %s::jsonb) RETURNING job_id",
            (ours.ENDPOINT, ours.snapshot("http://127.0.0.1:9/unused")),
        ).fetchone()[0]
        conn.execute(
            "INSERT INTO executions (job_id, endpoint, endpoint_type, status, run_at)"
            " SELECT %s, %s, 'HTTP', 'QUEUED', now() - interval '1 second'"
            " FROM generate_series(1, %s::int)",
            (job_id, ours.ENDPOINT, due),
        )
        for size in sizes:
            started = time.monotonic()
            conn.execute(
                "INSERT INTO executions (job_id, endpoint, endpoint_type, status, attempt_count,"
                " run_at, started_at, completed_at, duration_ms, created_at)"
                " SELECT %s, %s, 'HTTP', CASE WHEN g %% 50 = 0 THEN 'FAILED' ELSE 'SUCCESS' END,"
                " 1, t, t, t + interval '20 ms', 20, t"
                " FROM (SELECT g, now() - (g || ' seconds')::interval AS t"
                "       FROM generate_series(%s::int, %s::int) g) s",
                (job_id, ours.ENDPOINT, have + 1, size - due),
            )
            have = size - due
            conn.execute("VACUUM ANALYZE executions")
            # Flush the bulk load now: otherwise the checkpointer writes it back while the
            # probe runs, and the largest size measures the checkpoint, not the claim.
            conn.execute("CHECKPOINT")
            progress(f"  scale: {size} executions in table ({time.monotonic() - started:.0f}s)")
            probe = run_json(
                [str(PROJECT_PY), str(BENCH / "ours_inproc.py"), "scale-probe", job_id, "30"],
                env=ours.project_env(url),
                timeout=600,
            )
            probe["rows"] = size
            points.append(probe)
            progress(
                f"  scale {size}: claim {probe['claim_ms_median']:.2f} ms, list page "
                f"{probe['list_page_ms_median']:.2f} ms, pickup index "
                f"{probe['uses_pickup_index']}"
            )
    out: dict[str, Any] = {"due_rows": due, "points": points}
    if len(points) > 1 and points[0]["claim_ms_median"]:
        out["claim_growth"] = points[-1]["claim_ms_median"] / points[0]["claim_ms_median"]
    return out


def api_rates(server: PgServer, sink: Sink, n: int) -> dict[str, Any]:
    """Workload 8: POST /jobs sequential, 8 concurrent clients, and in-process handler."""
    url = ours.prepare_db(server, "bench_api")
    procs = Procs()
    try:
        api = ours.start_api(procs, url, stack=False)
        ours.create_endpoint(api, sink.url)

        def body(tag: str, i: int) -> dict[str, Any]:
            return {
                "endpoint": ours.ENDPOINT,
                "trigger": "IMMEDIATE",
                "idempotency_key": f"{tag}-{i}",
                "input": {"n": i},
            }

        ours.post_job(api, body("warm", 0))  # the API process reads the endpoint once
        times = []
        for i in range(n):
            start = time.perf_counter()
            ours.post_job(api, body("seq", i))
            times.append(time.perf_counter() - start)
        sequential = n / sum(times)
        clients = _Clients(api.port)
        start = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: ours.post_job(clients.get(), body("conc", i)), range(n)))
        concurrent = n / (time.perf_counter() - start)
    finally:
        procs.stop()
    inproc = ours.inproc_rate(url, n)
    out = {
        "n": n,
        "sequential_per_s": sequential,
        "sequential_p50_ms": 1000 * statistics.median(times),
        "concurrent8_per_s": concurrent,
        "inprocess_per_s": inproc["per_s"],
        "inprocess_p50_ms": inproc["p50_ms"],
    }
    progress(
        f"API POST /jobs: sequential {sequential:.0f}/s (p50 {out['sequential_p50_ms']:.2f} ms), "
        f"8 clients {concurrent:.0f}/s, "
        f"in-process {inproc['per_s']:.0f}/s"
    )
    return out


def cold_import(repeat: int = 10) -> dict[str, Any]:
    """Workload 9a: `import app` in a fresh interpreter, median of `repeat`."""
    imports, walls, heavy = [], [], []
    for _ in range(repeat):
        start = time.perf_counter()
        result = run_json(
            [str(PROJECT_PY), str(BENCH / "ours_inproc.py"), "import-app"],
            env=ours.project_env("postgresql://unused@/x"),
            timeout=60,
        )
        walls.append(time.perf_counter() - start)
        imports.append(result["import_s"])
        heavy = result["heavy_modules_loaded"]
    out = {
        "import_ms_median": statistics.median(imports) * 1000,
        "process_ms_median": statistics.median(walls) * 1000,
        "heavy_modules_loaded": heavy,
        "repeat": repeat,
    }
    progress(
        f"cold import of app.py: {out['import_ms_median']:.0f} ms (process "
        f"{out['process_ms_median']:.0f} ms); heavy modules loaded: {heavy}"
    )
    return out


def package_size() -> dict[str, Any]:
    """Workload 9b: `chalice package` into bench/.work; size of deployment.zip as deployed
    (slimmed as the CDK stack slims it), and before slimming.

    The same package as ``make bench-package`` (bench/lambda_package.py) builds.
    """
    import lambda_package
    from stacks.packaging import slim_deployment_zip

    zip_path = lambda_package.package(WORK / "package")
    slim = slim_deployment_zip(zip_path)
    figures = lambda_package.zip_figures(zip_path)
    figures["zip_mib_before_slim"] = round(slim.bytes_before / 2**20, 2)
    progress(
        f"Lambda package: deployment.zip {figures['zip_mib']:.2f} MiB as deployed "
        f"({figures['zip_mib_before_slim']:.2f} before slimming; "
        f"{figures['unzipped_mib']:.1f} MiB unzipped)"
    )
    return figures


def memory(server: PgServer, n: int, delay: float = 0.25) -> dict[str, Any]:
    """Workload 10: worker peak RSS while holding 50 slow deliveries in flight."""
    ours.require_module("chalicelib.worker")
    port = free_port()
    procs = Procs()
    try:
        procs.start(
            "slow-sink",
            [str(BENCH_PY), str(BENCH / "slow_sink.py"), str(port), str(delay)],
            ours.project_env("unused"),
        )
        time.sleep(1.0)
        slow_url = f"http://127.0.0.1:{port}/slow"
        url = ours.prepare_db(server, "bench_memory")
        with server.connect("bench_memory") as conn:
            ours.seed_endpoint_sql(conn, slow_url)
            ours.seed_immediate_sql(conn, slow_url, n)
            workers = Procs()
            try:
                ours.start_workers(workers, url, 1)
                peak_running, peak_rss = _watch_running(conn, workers, n)
            finally:
                workers.stop()
    finally:
        procs.stop()
    out = {
        "n": n,
        "sink_delay_s": delay,
        "peak_rss_mb": peak_rss / 2**20,
        "peak_running": peak_running,
    }
    progress(
        f"memory: worker peak RSS {out['peak_rss_mb']:.0f} MB with up to "
        f"{peak_running} deliveries in flight"
    )
    return out


def _watch_running(conn: Any, workers: Procs, n: int) -> tuple[int, int]:
    peak_running, peak_rss, deadline = 0, 0, time.monotonic() + 300
    while time.monotonic() < deadline:
        running, done = conn.execute(
            "SELECT count(*) FILTER (WHERE status = 'RUNNING'), count(*) FILTER (WHERE status"
            f" IN {ours.TERMINAL}) FROM executions"
        ).fetchone()
        peak_running = max(peak_running, running)
        peak_rss = max(peak_rss, workers.rss_bytes())
        if done >= n:
            break
        workers.check_alive()
        time.sleep(0.1)
    return peak_running, peak_rss
