"""A/B: the hand-written HTTP/1.1 client (``wire.py``) vs. aiohttp, end to end, paired rounds.

The rule it decides: keep the hand-written client only if it is at least 15 % faster end to
end. Both sides run the same :class:`HttpDispatcher` (URL parsing, address policy,
classification) on the same delivery loop against the same sink (the bench's nginx,
``return 200``, access log on, 127.0.0.1 only); only the client class differs
(:mod:`aiohttp_client`: one ``ClientSession``, ``TCPConnector(limit=50)``, keep-alive).
Rounds alternate the order (A B, B A, ...); figures are medians, the ratio is the median of
the per-round ratios wire/aiohttp.

Two modes:

* ``worker`` (the rule's figure): workload 1 of ``make bench``, N seeded IMMEDIATE
  executions delivered by one ``python -m chalicelib.worker`` process (50 slots) on the
  durable PostgreSQL server; rate = first claim to last finalize; worker CPU seconds.
  Harness in the bench venv, the worker in the project's ``.venv`` (which needs aiohttp).
* ``loop``: no database. N deliveries through :class:`DeliveryLoop` with capacity 50 in
  this process, each slot freed as soon as its attempt finishes; rate and this process's
  CPU per delivery. Run with the project's ``.venv``.

Usage::

    bench/.work/venv/bin/python bench/experiments/http_client_ab.py worker [N] [ROUNDS]
    .venv/bin/python bench/experiments/http_client_ab.py loop [N] [ROUNDS]
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parents[1])]

from common import BENCH, PROJECT_PY, progress  # noqa: E402
from sink import Sink  # noqa: E402

CLIENTS = ("wire", "aiohttp")
CAPACITY = 50


# -- worker mode -----------------------------------------------------------------------------


def worker_round(server: Any, sink_url: str, n: int, client: str) -> dict[str, Any]:
    import ours

    def start(procs: ours.Procs, url: str, count: int, **extra: str) -> None:
        launcher = BENCH / "experiments" / "http_client_worker.py"
        for _ in range(count):
            args = [str(PROJECT_PY), str(launcher), client]
            procs.start(f"worker-{client}", args, ours.project_env(url, **extra))

    ours.start_workers = start  # type: ignore[assignment]
    result = ours.run_throughput(server, sink_url, n, 1)
    return {"per_s": result["per_s"], "cpu_us": result["worker_cpu_s"] / n * 1e6}


def worker_mode(n: int, rounds: int) -> dict[str, list[dict[str, Any]]]:
    from pgserver import PgServer

    server, sink = PgServer(), Sink()
    server.start()
    sink.start()
    try:
        return paired(rounds, lambda client: worker_round(server, sink.url, n, client))
    finally:
        sink.stop()
        server.stop()


# -- loop mode -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Claimed:
    execution_id: str
    endpoint_type: str = "HTTP"


@dataclass(frozen=True)
class _Prepared:
    claimed: _Claimed
    request: Any


class _Pipeline:
    """The pipeline's two calls on the loop, without the attempt bookkeeping."""

    def begin(self, prepared: _Prepared) -> _Prepared:
        return prepared

    def complete(self, prepared: _Prepared, outcome: Any) -> Any:
        return outcome


def loop_round(sink_url: str, n: int, client: str) -> dict[str, Any]:
    from datetime import UTC, datetime

    from aiohttp_client import AiohttpClient

    import chalicelib.worker.dispatchers.http as http
    from chalicelib.domain.delivery import DeliveryRequest
    from chalicelib.worker.deliveries import DeliveryLoop
    from chalicelib.worker.dispatchers.wire import HttpClient

    http.HttpClient = AiohttpClient if client == "aiohttp" else HttpClient  # type: ignore[misc]
    dispatcher = http.HttpDispatcher(
        allow_private=True, pool_maxsize=CAPACITY, clock=lambda: datetime.now(UTC)
    )
    spec = {
        "url": sink_url,
        "method": "POST",
        "headers": {"Content-Type": "application/json"},
        "timeout_ms": 5000,
        "expected_status_codes": [200],
    }
    items = [
        _Prepared(
            _Claimed(f"00000000-0000-4000-8000-{i:012d}"),
            DeliveryRequest(
                execution_id=f"00000000-0000-4000-8000-{i:012d}",
                attempt=1,
                spec={**spec, "body_template": {"n": i}},
            ),
        )
        for i in range(n)
    ]
    done, outcomes = threading.Event(), {"ok": 0, "failed": 0}

    def finished(outcome: Any) -> None:
        outcomes["ok" if outcome.ok else "failed"] += 1
        loop.release_slots(1)
        if outcomes["ok"] + outcomes["failed"] == n:
            done.set()

    def lost(claimed: Any, exc: BaseException) -> None:
        print("lost", claimed.execution_id, repr(exc))
        outcomes["failed"] += 1

    loop = DeliveryLoop(
        _Pipeline(),  # type: ignore[arg-type]
        {"HTTP": dispatcher},
        capacity=CAPACITY,
        on_finished=finished,  # type: ignore[arg-type]
        on_lost=lost,  # type: ignore[arg-type]
    )
    cpu, wall = time.process_time(), time.perf_counter()
    loop.submit(items)  # type: ignore[arg-type]
    if not done.wait(300):
        raise RuntimeError(f"{client}: {outcomes} after 300 s")
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    loop.close()
    if outcomes["failed"]:
        raise RuntimeError(f"{client}: {outcomes['failed']} deliveries failed")
    progress(f"loop {client}: {n / wall:.0f}/s, {cpu / n * 1e6:.0f} µs CPU per delivery")
    return {"per_s": n / wall, "cpu_us": cpu / n * 1e6}


def loop_mode(n: int, rounds: int) -> dict[str, list[dict[str, Any]]]:
    sink = Sink()
    sink.start()
    try:
        for client in CLIENTS:  # warm-up: imports, nginx, page cache
            loop_round(sink.url, 2_000, client)
        return paired(rounds, lambda client: loop_round(sink.url, n, client))
    finally:
        sink.stop()


# -- both ------------------------------------------------------------------------------------


def paired(rounds: int, run: Callable[[str], dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Each round runs both clients back to back, the order alternating per round."""
    runs: dict[str, list[dict[str, Any]]] = {client: [] for client in CLIENTS}
    for index in range(rounds):
        order = CLIENTS if index % 2 == 0 else CLIENTS[::-1]
        progress(f"round {index + 1}/{rounds}: {' then '.join(order)}")
        for client in order:
            runs[client].append(run(client))
    return runs


def report(mode: str, n: int, runs: dict[str, list[dict[str, Any]]]) -> None:
    print(f"\n{mode} mode, N={n}, {CAPACITY} in flight, {len(runs['wire'])} rounds")
    for client, items in runs.items():
        rates = [round(r["per_s"]) for r in items]
        cpus = [round(r["cpu_us"]) for r in items]
        print(
            f"  {client:8} deliveries/s {rates} median {statistics.median(rates):.0f}; "
            f"CPU µs/delivery {cpus} median {statistics.median(cpus):.0f}"
        )
    pairs = [w["per_s"] / a["per_s"] for w, a in zip(runs["wire"], runs["aiohttp"], strict=True)]
    cpu_pairs = [
        w["cpu_us"] / a["cpu_us"] for w, a in zip(runs["wire"], runs["aiohttp"], strict=True)
    ]
    print(f"  rate ratio wire/aiohttp per round {[round(p, 3) for p in pairs]}")
    print(f"  median rate ratio wire/aiohttp: {statistics.median(pairs):.3f} (keep if >= 1.15)")
    print(f"  median CPU ratio wire/aiohttp: {statistics.median(cpu_pairs):.3f}")


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "worker"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 20_000
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    modes = {"worker": worker_mode, "loop": loop_mode}
    if mode not in modes:
        raise SystemExit(f"usage: http_client_ab.py {{{'|'.join(modes)}}} [N] [ROUNDS]")
    report(mode, n, modes[mode](n, rounds))


if __name__ == "__main__":
    main()
