"""Where a worker's slots sit while it delivers: in delivery, or waiting for their record.

Runs workload 1 (N seeded IMMEDIATE executions, one worker process, default settings, the
same durable PostgreSQL and nginx sink as ``make bench``) with the worker's metrics port
on, and scrapes it every ``--every`` ms: ``te_worker_in_flight`` (held: claimed, not yet
recorded) and ``te_worker_awaiting_record`` (of those, delivery ended). Prints the mean of
each over the busy middle of the run (the first and last tenth of the samples dropped) and,
by Little's law at the run's rate, how long an execution spends in each stage:

* in delivery: claimed, handed to the delivery loop, sent, answered;
* awaiting its record: in the finalizer's queue or in the statement that records it;
* claimed in flight: the rest of the capacity, on average the executions a claim (the
  finalizer's refill, in the statement that records) is taking but has not handed over yet,
  or slots nobody holds (a lone endpoint's reserve).

Scraping costs the worker CPU (every 5 ms: about a tenth more per job), so read the
split, not the rate; ``make bench`` measures the rate.

Usage (bench venv): python bench/experiments/ring_occupancy.py [N] [--every MS] [--slots K]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ours
from common import free_port, progress
from pgserver import PgServer
from sink import Sink

GAUGES = ("te_worker_in_flight", "te_worker_awaiting_record")


def scrape(port: int) -> dict[str, float] | None:
    """The two gauges from the worker's port; None while it is not up."""
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        with urllib.request.urlopen(url, timeout=1) as reply:
            text = reply.read().decode()
    except (OSError, urllib.error.URLError):
        return None
    values = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in GAUGES:
            values[name] = float(value)
    return values if len(values) == len(GAUGES) else None


def sample(port: int, every: float, stop: threading.Event, out: list[dict[str, float]]) -> None:
    while not stop.is_set():
        got = scrape(port)
        if got is not None and got["te_worker_in_flight"] > 0:
            out.append(got)
        stop.wait(every)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", type=int, nargs="?", default=20_000)
    parser.add_argument("--every", type=float, default=5.0, metavar="MS")
    parser.add_argument("--slots", type=int, default=50, help="TE_WORKER_MAX_CONCURRENT")
    args = parser.parse_args()
    port = free_port()
    env = {"TE_WORKER_METRICS_PORT": str(port), "TE_WORKER_MAX_CONCURRENT": str(args.slots)}
    server, sink = PgServer(), Sink()
    server.start()
    sink.start()
    samples: list[dict[str, float]] = []
    stop = threading.Event()
    sampler = threading.Thread(target=sample, args=(port, args.every / 1000, stop, samples))
    sampler.start()
    try:
        result = ours.run_throughput(server, sink.url, args.n, 1, env=env)
    finally:
        stop.set()
        sampler.join()
        sink.stop()
        server.stop()
    busy = samples[len(samples) // 10 : len(samples) * 9 // 10]
    if not busy:
        raise SystemExit("no samples: the worker's metrics port never answered")
    rate = result["per_s"]
    held = statistics.mean(s["te_worker_in_flight"] for s in busy)
    recording = statistics.mean(s["te_worker_awaiting_record"] for s in busy)
    delivering = held - recording
    rest = args.slots - held
    progress(f"{len(busy)} samples every {args.every:g} ms at {rate:.0f} deliveries/s")
    print(f"{'stage':<26}{'slots (mean)':>14}{'ms per execution':>18}")
    for stage, slots in (
        ("in delivery", delivering),
        ("awaiting its record", recording),
        ("claimed in flight / free", rest),
        ("cycle (capacity)", float(args.slots)),
    ):
        print(f"{stage:<26}{slots:>14.1f}{1000 * slots / rate:>18.2f}")


if __name__ == "__main__":
    started = time.monotonic()
    main()
    progress(f"done in {time.monotonic() - started:.0f} s")
