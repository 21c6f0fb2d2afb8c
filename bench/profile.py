"""Where the time goes: py-spy profiles of our worker (workload 1) and API (workload 4).

Attaches py-spy to a running ``python -m chalicelib.worker`` while it delivers N seeded
executions, and to the API server while it takes one POST /jobs every 20 ms. Writes the
raw collapsed stacks to bench/results/profile-*.txt and prints/saves a summary (top
functions by inclusive and self samples) to bench/results/PROFILE.md.
"""

from __future__ import annotations

import collections
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import ours
from common import BENCH_PY, RESULTS, progress, write_json
from pgserver import PgServer
from sink import Sink

PYSPY = Path(BENCH_PY).parent / "py-spy"
FRAME = re.compile(r"^(?P<fn>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")


def record(pid: int, out: Path, *, gil: bool, rate: int = 200) -> subprocess.Popen[bytes]:
    """py-spy on a running process: --gil samples only the thread holding the GIL (where
    Python CPU goes); without it, every non-idle thread (CPU plus blocking I/O)."""
    args = [str(PYSPY), "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw"]
    args += ["--nonblocking", "-o", str(out), *(["--gil"] if gil else [])]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def finish(spy: subprocess.Popen[bytes]) -> None:
    spy.send_signal(signal.SIGINT)
    try:
        spy.wait(timeout=30)
    except subprocess.TimeoutExpired:
        spy.kill()


def _short(frame: str) -> str:
    match = FRAME.match(frame.strip())
    if not match:
        return frame.strip()
    path = match.group("file")
    for marker in ("site-packages/", "/work/main/", "lib/python3.11/"):
        if marker in path:
            path = path.split(marker, 1)[1]
    return f"{match.group('fn')} ({path})"


def summarize(raw: Path, top: int = 25) -> dict[str, Any]:
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        frames = [_short(f) for f in stack.split(";") if f]
        total += n
        for name in set(frames):
            inclusive[name] += n
        if frames:
            own[frames[-1]] += n
    pct = lambda c: [(name, round(100 * v / total, 1)) for name, v in c.most_common(top)]  # noqa: E731
    return {"samples": total, "inclusive": pct(inclusive), "self": pct(own)}


def profile_worker(server: PgServer, sink: Sink, n: int, *, gil: bool) -> dict[str, Any]:
    url = ours.prepare_db(server, "bench_profile_worker")
    out = RESULTS / f"profile-worker{'-gil' if gil else ''}.txt"
    with server.connect("bench_profile_worker") as conn:
        ours.seed_endpoint_sql(conn, sink.url)
        ours.seed_immediate_sql(conn, sink.url, n)
        procs = ours.Procs()
        try:
            # Attached right after start: the seeded rows are claimed at once.
            ours.start_workers(procs, url, 1)
            spy = record(procs.procs[0].pid, out, gil=gil)
            ours.wait_terminal(conn, n, procs, "profiled worker")
            cpu = procs.cpu_seconds()
            finish(spy)
        finally:
            procs.stop()
        stats = ours.window_stats(conn)
    busy = cpu / stats["db_window_s"] if stats["db_window_s"] else None
    progress(
        f"worker profile: {stats['per_s'] or 0:.0f}/s under py-spy, worker CPU "
        f"{busy or 0:.2f} cores -> {out.name}"
    )
    return {"throughput_under_profiler": stats, "worker_cpu_cores": busy, **summarize(out)}


def profile_api(server: PgServer, sink: Sink, seconds: float) -> dict[str, Any]:
    url = ours.prepare_db(server, "bench_profile_api")
    out = RESULTS / "profile-api.txt"
    procs = ours.Procs()
    try:
        api = ours.start_api(procs, url, stack=False)
        ours.create_endpoint(api, sink.url)
        spy = record(procs.procs[0].pid, out, gil=False)
        start, i = time.monotonic(), 0
        times = []
        while time.monotonic() - start < seconds:
            t = time.perf_counter()
            ours.post_job(
                api,
                {
                    "endpoint": ours.ENDPOINT,
                    "trigger": "IMMEDIATE",
                    "idempotency_key": f"prof-{i}",
                    "input": {"n": i},
                },
            )
            times.append(time.perf_counter() - t)
            i += 1
            time.sleep(max(0.0, 0.02 - (time.perf_counter() - t)))
        finish(spy)
    finally:
        procs.stop()
    times.sort()
    progress(f"API profile: {i} POST /jobs, median {times[len(times) // 2] * 1000:.1f} ms")
    return {"requests": i, "median_ms": times[len(times) // 2] * 1000, **summarize(out)}


def write_markdown(profiles: dict[str, dict[str, Any]]) -> str:
    lines = ["# Profiles (py-spy raw stacks in profile-*.txt)", ""]
    for title, data in profiles.items():
        lines += [
            f"## {title}: {data.get('samples')} samples",
            "",
            "| inclusive % | function |",
            "| --- | --- |",
        ]
        lines += [f"| {p} | `{n}` |" for n, p in data.get("inclusive", [])]
        lines += ["", "| self % | function |", "| --- | --- |"]
        lines += [f"| {p} | `{n}` |" for n, p in data.get("self", [])]
        lines.append("")
    text = "\n".join(lines)
    (RESULTS / "PROFILE.md").write_text(text, "utf-8")
    return text


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    server, sink = PgServer(), Sink()
    server.start()
    sink.start()
    try:
        profiles = {
            "Worker, workload 1, GIL holder only (Python CPU)": profile_worker(
                server, sink, n, gil=True
            ),
            "Worker, workload 1, all non-idle threads (CPU + blocking I/O)": profile_worker(
                server, sink, n, gil=False
            ),
            "API server, POST /jobs every 20 ms, all non-idle threads": profile_api(
                server, sink, 15
            ),
        }
    finally:
        sink.stop()
        server.stop()
    write_json(RESULTS / "profile.json", profiles)
    print(write_markdown(profiles))


if __name__ == "__main__":
    main()
