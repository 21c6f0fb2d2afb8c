"""Benchmark driver: ``make bench`` (full, about 30 minutes) and ``make bench-quick`` (about
10 minutes; workload 13, on time in both profiles, waits for minute boundaries: about 10 and
5 minutes of each).

Starts its own durable PostgreSQL and an nginx sink under bench/.work, runs every workload,
prints a table and writes bench/results/ (bench.json, RESULTS.md, PNG plots); quick runs
write bench/results/quick/ instead so the committed full results stay intact.

Usage: run.py [--quick] [--only throughput,latency,delayed,cron,scale,api,batch,coldstart,
package,memory,fairness,on_time] [--rounds K] [--spread-endpoints K]

A run of a subset (``--only``) is merged into the existing bench.json of its mode: the
workloads it ran replace theirs, the others are kept, and ``runs`` records when and where
each replaced workload was measured (RESULTS.md says so for those not of the header's run).

``--spread-endpoints K`` adds a run to each throughput round: ours, 1 worker, the N
executions spread evenly over K endpoints with the same sink URL (key ``ours_1w_spread``).
"""

from __future__ import annotations

import argparse
import json
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import batches
import fairness
import jobcost
import on_time
import ours
import peers
import pgbench_ref
import report
import workloads
from common import RESULTS, machine, median, progress, write_json
from pgserver import PgServer
from sink import Sink

PHASES = [
    "throughput",
    "latency",
    "delayed",
    "cron",
    "scale",
    "api",
    "batch",
    "coldstart",
    "package",
    "memory",
    "fairness",
    "on_time",
]

FULL = {
    "n": 20_000,
    "rounds": 3,
    "pgbench_s": 15,
    "latency_s": 30,
    "delayed": (1000, 60),
    "cron": (200, 3),
    "scale": [10_000, 100_000, 1_000_000],
    "api_n": 500,
    "batches": 20,
    "memory_n": 2000,
    "fairness": (120, 500),
    # Workload 13, per profile: DELAYED jobs, cron jobs kept / replaced / paused and resumed,
    # how many minute boundaries, and before which one the replaces and resumes fall.
    "on_time": on_time.FULL,
    # The work per delivered job must stay within its budget against PgQueuer's with the
    # load spread over 20 endpoints too, not only on one.
    "spread_endpoints": 20,
}
QUICK = {
    "n": 2_000,
    "rounds": 1,
    "pgbench_s": 5,
    "latency_s": 5,
    "delayed": (100, 10),
    "cron": (50, 1),
    "scale": [10_000],
    "api_n": 150,
    "batches": 4,
    "memory_n": 600,
    "fairness": (120, 200),
    "on_time": on_time.QUICK,
}


def guarded(name: str, fn: Callable[[], Any]) -> Any:
    """Run one workload; a missing piece or a failure is recorded, never fatal."""
    progress(f"== {name}")
    try:
        return fn()
    except ours.Missing as exc:
        progress(f"   {name}: MISSING - {exc}")
        return {"status": "missing", "reason": str(exc)}
    except Exception as exc:
        progress(f"   {name}: ERROR - {str(exc).splitlines()[0][:300]}")
        return {
            "status": "error",
            "error": str(exc)[-3000:],
            "traceback": traceback.format_exc()[-3000:],
        }


def throughput(server: PgServer, sink: Sink, cfg: dict[str, Any]) -> dict[str, Any]:
    """Workloads 1-3, interleaved per round so each ratio compares runs minutes apart."""
    pgbench_ref.prepare(server)
    rounds = []
    spread = cfg.get("spread_endpoints") or 0
    cpu = jobcost.MachineCpu().start()

    def measured(label: str, run: Callable[[], Any]) -> Any:
        """A run whose work per job is reported, with the machine's CPU beside it."""
        return guarded(label, lambda: jobcost.on_machine(cpu, sink, run))

    for r in range(cfg["rounds"]):
        progress(f"-- throughput round {r + 1}/{cfg['rounds']} (N={cfg['n']})")
        rounds.append(
            {
                "pgbench": guarded("pgbench", lambda: peers.run_pgbench(server, cfg["pgbench_s"])),
                "pgqueuer": measured(
                    "PgQueuer", lambda: peers.run_pgqueuer(server, sink.url, cfg["n"])
                ),
                "procrastinate": guarded(
                    "Procrastinate", lambda: peers.run_procrastinate(server, sink.url, cfg["n"])
                ),
                "ours_1w": measured(
                    "ours, 1 worker", lambda: ours.run_throughput(server, sink.url, cfg["n"], 1)
                ),
                "ours_2w": measured(
                    "ours, 2 workers", lambda: ours.run_throughput(server, sink.url, cfg["n"], 2)
                ),
                # The endpoint may use all 50 slots, as a deployment with one endpoint would
                # set it: TE_WORKER_ENDPOINT_SHARE=1 (no reserve for other endpoints; a
                # spec.max_concurrent never takes the reserve). The default share is half.
                "ours_1w_all_slots": measured(
                    "ours, 1 worker, endpoint share 1",
                    lambda: ours.run_throughput(
                        server, sink.url, cfg["n"], 1, env={"TE_WORKER_ENDPOINT_SHARE": "1"}
                    ),
                ),
            }
        )
        # CockroachDB's configuration (no SKIP LOCKED: candidates then a compare-and-set
        # take; no LISTEN/NOTIFY), on the same PostgreSQL: what its claim costs here.
        rounds[-1]["ours_1w_crdb_config"] = measured(
            "ours, 1 worker, CockroachDB's configuration",
            lambda: ours.run_throughput(server, sink.url, cfg["n"], 1, env=CRDB_CONFIG),
        )
        if spread > 1:
            # Optional (--spread-endpoints): the same N over K endpoints, each at its
            # default share, so the worker's slots are not held to one endpoint's cap.
            rounds[-1]["ours_1w_spread"] = measured(
                f"ours, 1 worker, load over {spread} endpoints",
                lambda: ours.run_throughput(server, sink.url, cfg["n"], 1, endpoints=spread),
            )
    cpu.stop()
    return {
        "n": cfg["n"],
        "rounds": rounds,
        "median": _medians(rounds),
        "ratios": _ratios(rounds),
        # Work per delivered job (bench/jobcost.py): medians, and ours ÷ PgQueuer per round.
        "per_job": jobcost.summary(rounds, PER_JOB_SYSTEMS),
    }


#: The runs whose work per delivered job is reported, PgQueuer (the reference) first.
PER_JOB_SYSTEMS = (
    "pgqueuer",
    "ours_1w",
    "ours_1w_all_slots",
    "ours_2w",
    "ours_1w_crdb_config",
    "ours_1w_spread",
)
#: The worker settings production uses on CockroachDB (as `make test-cockroach` runs them).
CRDB_CONFIG = {"TE_CLAIM_STRATEGY": "conditional_update", "TE_WAKEUP_NOTIFY": "off"}


def _rate(entry: dict[str, Any]) -> float | None:
    return entry.get("tps") or entry.get("per_s")


def _medians(rounds: list[dict[str, Any]]) -> dict[str, float | None]:
    keys = rounds[0].keys() if rounds else []
    return {k: median([_rate(r.get(k) or {}) for r in rounds]) for k in keys}


def _ratios(rounds: list[dict[str, Any]]) -> dict[str, float | None]:
    pairs = {
        "ours_1w/pgqueuer": ("ours_1w", "pgqueuer"),
        "ours_1w_all_slots/pgqueuer": ("ours_1w_all_slots", "pgqueuer"),
        "ours_1w_spread/pgqueuer": ("ours_1w_spread", "pgqueuer"),
        "ours_1w_crdb_config/pgqueuer": ("ours_1w_crdb_config", "pgqueuer"),
        "ours_1w/procrastinate": ("ours_1w", "procrastinate"),
        "ours_1w/pgbench_tps": ("ours_1w", "pgbench"),
        "ours_2w/pgbench_tps": ("ours_2w", "pgbench"),
        "pgqueuer/pgbench_tps": ("pgqueuer", "pgbench"),
    }
    out: dict[str, float | None] = {}
    for name, (a, b) in pairs.items():
        if not any(a in r for r in rounds):
            continue  # an optional run that was not asked for
        values = []
        for r in rounds:
            x, y = _rate(r.get(a) or {}), _rate(r.get(b) or {})
            if x and y:
                values.append(x / y)
        out[name] = median(values)
    return out


#: The configuration keys each workload reads (a subset run merges only its own).
PHASE_CONFIG = {
    "throughput": ("n", "rounds", "pgbench_s", "spread_endpoints"),
    "latency": ("latency_s",),
    "delayed": ("delayed",),
    "cron": ("cron",),
    "scale": ("scale",),
    "api": ("api_n",),
    "batch": ("batches",),
    "memory": ("memory_n",),
    "fairness": ("fairness",),
    "on_time": ("on_time",),
}


def merge_subset(path: Path, new: dict[str, Any], ran: list[str]) -> dict[str, Any]:
    """A subset run (``--only``) merged into the results already at ``path`` (same mode):
    the workloads it ran replace theirs, the others and the header are kept, and
    ``runs[workload]`` says when, where and on what commit each replaced one was measured.
    Without earlier results of the same mode, the subset's own results."""
    try:
        old = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return new
    if old.get("mode") != new.get("mode"):
        return new
    merged = dict(old)
    runs = dict(old.get("runs") or {})
    config = dict(old.get("config") or {})
    for phase in ran:
        merged[phase] = new.get(phase)
        runs[phase] = {
            "started_at": new["started_at"],
            "duration_s": new["duration_s"],
            "machine": new["machine"],
            "config": new["config"],
        }
        for key in PHASE_CONFIG.get(phase, ()):
            if key in new["config"]:
                config[key] = new["config"][key]
    merged["runs"], merged["config"] = runs, config
    progress(f"merged {', '.join(ran)} into the results of {old.get('started_at')} in {path}")
    return merged


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default=",".join(PHASES))
    parser.add_argument("--rounds", type=int)
    parser.add_argument(
        "--spread-endpoints",
        type=int,
        default=0,
        metavar="K",
        help="also run ours, 1 worker, with the N spread over K endpoints (e.g. 20)",
    )
    args = parser.parse_args()
    cfg = dict(QUICK if args.quick else FULL)
    if args.rounds:
        cfg["rounds"] = args.rounds
    if args.spread_endpoints > 1:
        cfg["spread_endpoints"] = args.spread_endpoints
    only = [p for p in args.only.split(",") if p]
    out_dir = RESULTS / "quick" if args.quick else RESULTS
    results: dict[str, Any] = {
        "mode": "quick" if args.quick else "full",
        "config": cfg,
        "machine": machine(),
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    progress(f"machine: {results['machine']}")
    server, sink = PgServer(), Sink()
    server.start()
    sink.start()
    t0 = time.monotonic()
    try:
        results["postgres"] = server.show_settings()
        plan: dict[str, Callable[[], Any]] = {
            "throughput": lambda: throughput(server, sink, cfg),
            "latency": lambda: {
                "local_stack": guarded(
                    "latency, local stack",
                    lambda: workloads.latency(server, sink, cfg["latency_s"], stack=True),
                ),
                "separate_worker": guarded(
                    "latency, separate worker process, NOTIFY wake-up",
                    lambda: workloads.latency(server, sink, cfg["latency_s"], stack=False),
                ),
                "pgqueuer": guarded(
                    "latency, PgQueuer enqueue -> handler",
                    lambda: workloads.pgqueuer_latency(server, sink, cfg["latency_s"]),
                ),
                "separate_worker_poll_only": guarded(
                    "latency, separate worker process, poll only",
                    lambda: workloads.latency(
                        server, sink, cfg["latency_s"], stack=False, poll_only=True
                    ),
                ),
            },
            "delayed": lambda: workloads.delayed(server, sink, *cfg["delayed"]),
            "cron": lambda: workloads.cron(server, sink, *cfg["cron"]),
            "scale": lambda: workloads.scale(server, cfg["scale"]),
            "api": lambda: workloads.api_rates(server, sink, cfg["api_n"]),
            "batch": lambda: batches.batch_rates(server, sink, cfg["batches"], cfg["rounds"]),
            "coldstart": workloads.cold_import,
            "package": workloads.package_size,
            "memory": lambda: workloads.memory(server, cfg["memory_n"]),
            "fairness": lambda: fairness.fairness(server, sink, *cfg["fairness"]),
            "on_time": lambda: on_time.on_time(server, sink, cfg["on_time"], guarded),
        }
        for phase in PHASES:
            if phase in only:
                results[phase] = guarded(phase, plan[phase])
    finally:
        sink.stop()
        server.stop()
    results["duration_s"] = round(time.monotonic() - t0, 1)
    ran = [p for p in PHASES if p in only]
    if set(ran) != set(PHASES):
        results = merge_subset(out_dir / "bench.json", results, ran)
    write_json(out_dir / "bench.json", results)
    print(report.render(results, out_dir))
    progress(f"wrote {out_dir}/bench.json, RESULTS.md and plots")


if __name__ == "__main__":
    main()
