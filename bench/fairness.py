"""Workload 11: healthy work behind a hung endpoint.

A target that accepts requests and never answers (``slow_sink.py`` with an hour's delay)
is registered with ``timeout_ms`` 300,000, the longest the API allows; HUNG executions of
it are seeded and the workers started. Once the hung endpoint holds its share of every
worker's slots (RUNNING stops growing), HEALTHY executions of the nginx sink are seeded,
due now. Lateness = the sink's receive time minus the execution's ``run_at``: with a
per-endpoint cap, the healthy ones go out through the slots the hung endpoint cannot take.
Run with one worker and with two. Target: p99 <= 1 s (no endpoint may starve another).
"""

from __future__ import annotations

import time
from typing import Any

import ours
from common import BENCH, BENCH_PY, free_port, progress, summary_ms
from ours import Procs
from pgserver import PgServer
from sink import Sink
from workloads import collect

HUNG_ENDPOINT = "bench-hung"
HUNG_TIMEOUT_MS = 300_000
SETTLE_S = 0.5  #: RUNNING unchanged this long: the hung endpoint holds all it may


def run(server: PgServer, sink: Sink, workers: int, hung: int, healthy: int) -> dict[str, Any]:
    """One measurement: ``hung`` executions to the hung target, then ``healthy`` to nginx."""
    ours.require_module("chalicelib.worker")
    port = free_port()
    targets, procs = Procs(), Procs()
    try:
        targets.start(
            "hung-sink",
            [str(BENCH_PY), str(BENCH / "slow_sink.py"), str(port), "3600"],
            ours.project_env("unused"),
        )
        time.sleep(1.0)
        hung_url = f"http://127.0.0.1:{port}/hung"
        name = f"bench_fair_{workers}w"
        url = ours.prepare_db(server, name)
        with server.connect(name) as conn:
            ours.seed_endpoint_sql(conn, sink.url)
            ours.seed_endpoint_sql(conn, hung_url, HUNG_ENDPOINT, timeout_ms=HUNG_TIMEOUT_MS)
            ours.seed_immediate_sql(conn, hung_url, hung, HUNG_ENDPOINT, timeout_ms=HUNG_TIMEOUT_MS)
            ours.start_workers(procs, url, workers)
            held = _wait_for_the_hung_share(conn, procs)
            mark = sink.mark()
            seeded = dict(ours.seed_immediate_sql(conn, sink.url, healthy))
            got = collect(sink, mark, set(seeded), timeout=60)
    finally:
        procs.stop()
        targets.stop()
    lateness = [got[eid] - seeded[eid] for eid in got]
    out = {
        "workers": workers,
        "hung": hung,
        "hung_running": held,
        "healthy": healthy,
        "received": len(got),
        "lateness": summary_ms(lateness),
    }
    progress(
        f"fairness x{workers}: {held} hung RUNNING, healthy {len(got)}/{healthy} received, "
        f"lateness p50 {out['lateness']['p50_ms'] or 0:.0f} / p99 "
        f"{out['lateness']['p99_ms'] or 0:.0f} ms"
    )
    return out


def _wait_for_the_hung_share(conn: Any, procs: Procs, timeout: float = 60) -> int:
    """RUNNING executions of the hung endpoint, once that count stops growing."""
    deadline = time.monotonic() + timeout
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        procs.check_alive()
        (running,) = conn.execute(
            "SELECT count(*) FROM executions WHERE endpoint = %s AND status = 'RUNNING'",
            (HUNG_ENDPOINT,),
        ).fetchone()
        if running != last:
            last, since = running, time.monotonic()
        elif running > 0 and time.monotonic() - since >= SETTLE_S:
            return int(running)
        time.sleep(0.05)
    raise RuntimeError(f"the hung endpoint's RUNNING count did not settle ({last})")


def fairness(server: PgServer, sink: Sink, hung: int, healthy: int) -> dict[str, Any]:
    """Workload 11 with one worker and with two."""
    return {f"{w}w": run(server, sink, w, hung, healthy) for w in (1, 2)}
