"""Work per delivered job: client statements and PostgreSQL CPU, beside WAL bytes and
worker CPU (measured by the callers), for our worker and PgQueuer in the same run.

Shared by ``ours.py`` (psycopg, the harness process) and ``peer_pgqueuer.py`` (asyncpg, the
peer's own process): SQL text, ``/proc`` readers and arithmetic only, no driver.

* **Client statements**: ``pg_stat_statements`` (``track = top``, utility statements
  tracked) of the database under test, reset at the start of the measured window
  (``RESET_SQL``) and summed at its end (``STATEMENTS_SQL``), leaving out the role
  ``bench_harness`` that the harness's own connections log in as (its polls, counters and
  the reset itself). ``calls`` counts completed statements: a statement that fails (e.g. a
  serialization failure) is not counted, its retry is. Protocol messages that are not
  statements (Parse, Describe, Sync) are not counted.
* **PostgreSQL CPU**: user + system CPU of every server process, read from ``/proc`` at
  both ends of the window: each live child of the postmaster (backends, background
  processes, I/O workers) by its run time in ns (``/proc/PID/schedstat``), the postmaster
  by its own and, for every child that exited and was reaped (e.g. a backend whose client
  disconnected), by its children's cumulative times (``cutime + cstime`` of
  ``/proc/PID/stat``: the kernel adds a child's times there when the parent reaps it). A
  snapshot in which a child counted live was reaped before the postmaster was read is
  taken again, so no exiting backend is counted twice or missed. The CPU of the harness's
  own backend over the window (its pid) is subtracted. Error: ``cutime + cstime`` are in
  clock ticks (10 ms), truncated once per reading (< 20 ms a run); a process running at
  the moment it is read lacks its current slice in schedstat (at most one scheduler tick,
  4 ms at HZ=250, per CPU); all in all under ~30 ms a run (1.5 µs per job at N=20,000,
  6 µs at N=5,000). Background work (walwriter, autovacuum) is counted when it falls
  inside the window; the CHECKPOINT the harness runs after each run falls outside it, for
  every system alike.
* **Machine CPU** (:class:`MachineCpu`): every process on the machine, ours or the peer's,
  PostgreSQL, nginx, the harness and the kernel's work for them (``/proc/stat``, sampled
  every 50 ms), over the busy middle of a run: from its 20th to its 80th percentile
  delivery as the sink received them, so start-up, seeding and the tail are left out. Per
  delivered job, and as the cores busy on average (2.0: both of a 2-core machine). What
  one system spends in all against another: the rate two cores can carry is at most
  their count divided by it.
"""

from __future__ import annotations

import bisect
import os
import re
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

HARNESS_ROLE = "bench_harness"
_DB = "(SELECT oid FROM pg_database WHERE datname = current_database())"
RESET_SQL = f"SELECT pg_stat_statements_reset(0::oid, {_DB}, 0::bigint)"
STATEMENTS_SQL = (
    "SELECT query, calls FROM pg_stat_statements"
    f" WHERE dbid = {_DB} AND toplevel"
    f" AND userid <> (SELECT oid FROM pg_roles WHERE rolname = '{HARNESS_ROLE}')"
)
#: Entries pg_stat_statements evicted since it started (should not move in a window).
DEALLOC_SQL = "SELECT dealloc FROM pg_stat_statements_info"
BACKEND_PID_SQL = "SELECT pg_backend_pid()"
#: Client connections of the system under test in this database (not the harness's).
CLIENTS_SQL = (
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
    f" AND backend_type = 'client backend' AND usename <> '{HARNESS_ROLE}'"
)

#: Per-job figures and the issue's targets for ours ÷ PgQueuer (None: reported, no target).
TARGETS: dict[str, float | None] = {
    "statements": 1.0,
    "pg_cpu_us": 2.0,
    "wal_bytes": 1.5,
    "worker_cpu_us": 1.0,
    "machine_cpu_us": None,
}
KINDS = ("begin", "commit", "rollback", "set")
FIELDS = (
    "statements",
    *KINDS,
    "pg_cpu_us",
    "wal_bytes",
    "worker_cpu_us",
    "machine_cpu_us",
    "cores_busy",
)
_KINDS = {
    "begin": "begin",
    "start": "begin",
    "commit": "commit",
    "end": "commit",
    "rollback": "rollback",
    "abort": "rollback",
    "set": "set",
    "reset": "set",
}
_COMMENT = re.compile(r"\A(?:\s+|--[^\n]*\n?|/\*.*?\*/)+", re.S)
_TICK = os.sysconf("SC_CLK_TCK")


def statement_kind(query: str) -> str:
    """begin, commit, rollback, set, or other: the statement's first keyword."""
    text = _COMMENT.sub("", query)
    word = re.match(r"[A-Za-z]*", text)
    return _KINDS.get(word.group(0).lower() if word else "", "other")


def statements(rows: Iterable[Sequence[Any]], dealloc: int = 0) -> dict[str, Any]:
    """Sum ``(query, calls)`` rows of STATEMENTS_SQL: total, by kind, the most called."""
    rows = [(str(q), int(c)) for q, c in rows]
    kinds: Counter[str] = Counter()
    for query, calls in rows:
        kinds[statement_kind(query)] += calls
    top = sorted(rows, key=lambda r: -r[1])[:12]
    return {
        "statements_total": sum(c for _, c in rows),
        "statements_by_kind": {k: kinds.get(k, 0) for k in (*KINDS, "other")},
        "statements_top": [[c, " ".join(q.split())[:160]] for q, c in top],
        "statements_evicted": dealloc,
    }


def _stat(pid: int) -> tuple[int, int, int] | None:
    """(ppid, own user+system ticks, reaped children's ticks) of a process, or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # fields[0] is field 3 (state)
    return int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])


def _own_s(pid: int, ticks: int) -> float:
    """A process's own CPU: its run time in ns from schedstat (its main thread's: server
    processes are single-threaded) where the kernel has it, else its tick count."""
    try:
        with open(f"/proc/{pid}/schedstat", encoding="ascii") as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return ticks / _TICK


def parent_pid(pid: int) -> int:
    """The postmaster's pid, from one of its backends' pid."""
    stat = _stat(pid)
    if stat is None:
        raise RuntimeError(f"no /proc/{pid}/stat: is the server on this machine?")
    return stat[0]


def process_cpu_s(pid: int) -> float:
    """User + system CPU of one (single-threaded) process so far (0 once it is gone)."""
    stat = _stat(pid)
    return _own_s(pid, stat[1]) if stat else 0.0


def server_cpu_s(postmaster: int) -> float:
    """User + system CPU of the postmaster and all its children, exited ones included:
    live children's own (and their reaped children's), then the postmaster's own and its
    reaped children's; again if a child counted live was reaped before the postmaster was
    read (it would be counted twice)."""
    for _ in range(20):
        live: dict[int, float] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                pid = int(entry)
                stat = _stat(pid)
                if stat is not None and stat[0] == postmaster:
                    live[pid] = _own_s(pid, stat[1]) + stat[2] / _TICK
        parent = _stat(postmaster)
        if parent is None:
            raise RuntimeError(f"postmaster {postmaster} is gone")
        own = _own_s(postmaster, parent[1])
        # A zombie keeps its /proc entry until the postmaster reaps it (into cutime).
        if all(os.path.exists(f"/proc/{pid}") for pid in live):
            return own + parent[2] / _TICK + sum(live.values())
    raise RuntimeError("server CPU: children kept exiting while being read")


class CpuWindow:
    """PostgreSQL CPU over a window, less the CPU of the harness's own backend."""

    def __init__(self, harness_backend_pid: int) -> None:
        self.harness = harness_backend_pid
        self.postmaster = parent_pid(harness_backend_pid)
        self.server0 = self.harness0 = 0.0

    def start(self) -> None:
        self.harness0 = process_cpu_s(self.harness)
        self.server0 = server_cpu_s(self.postmaster)

    def stop(self) -> dict[str, float]:
        server = server_cpu_s(self.postmaster) - self.server0
        harness = process_cpu_s(self.harness) - self.harness0
        return {"pg_cpu_s": server - harness, "harness_backend_cpu_s": harness}


class MachineCpu:
    """The machine's busy CPU time, sampled every ``every`` seconds by a daemon thread from
    ``/proc/stat`` (user, nice, system, irq, softirq and steal ticks: every state but idle
    and iowait; guest time is inside user already)."""

    def __init__(self, every: float = 0.05) -> None:
        self.every = every
        self.samples: list[tuple[float, int]] = []  # (UNIX time, busy ticks so far)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="machine-cpu", daemon=True)

    def start(self) -> MachineCpu:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.is_set():
            with open("/proc/stat", encoding="ascii") as f:
                user, nice, system, _idle, _iowait, irq, softirq, steal = map(
                    int, f.readline().split()[1:9]
                )
            self.samples.append((time.time(), user + nice + system + irq + softirq + steal))
            self._stop.wait(self.every)

    def middle(self, received: Sequence[float]) -> dict[str, float | None]:
        """Over the 20th to the 80th percentile of ``received`` (the times the sink got a
        run's deliveries): the machine's CPU per delivered job in µs, and the cores busy."""
        times = sorted(received)
        if len(times) < 100:
            return {"machine_cpu_us": None, "cores_busy": None}
        first, last = times[len(times) // 5], times[len(times) * 4 // 5]
        at = [t for t, _ in self.samples]
        i, j = bisect.bisect_left(at, first), bisect.bisect_right(at, last) - 1
        if j - i < 2:
            return {"machine_cpu_us": None, "cores_busy": None}
        (t0, busy0), (t1, busy1) = self.samples[i], self.samples[j]
        jobs = bisect.bisect_right(times, t1) - bisect.bisect_left(times, t0)
        busy_s = (busy1 - busy0) / _TICK
        return {
            "machine_cpu_us": busy_s * 1e6 / jobs if jobs else None,
            "cores_busy": busy_s / (t1 - t0),
        }


def on_machine(machine: MachineCpu, sink: Any, run: Callable[[], Any]) -> Any:
    """``run()``'s result, its per-job figures joined by the machine's CPU over the busy
    middle of its deliveries (``sink``: the bench's nginx sink, which timed them)."""
    mark = sink.mark()
    result = run()
    if isinstance(result, dict) and isinstance(result.get("per_job"), dict):
        received = [at for at, _ in sink.read_since(mark)]
        result["per_job"].update(machine.middle(received))
    return result


def per_job(result: Mapping[str, Any], delivered: int | None) -> dict[str, float | None]:
    """The per-delivered-job figures of one run's result."""

    def each(value: float | None, scale: float = 1.0) -> float | None:
        return value * scale / delivered if value is not None and delivered else None

    kinds = result.get("statements_by_kind") or {}
    return {
        "statements": each(result.get("statements_total")),
        **{k: each(kinds.get(k)) for k in KINDS},
        "pg_cpu_us": each(result.get("pg_cpu_s"), 1e6),
        "wal_bytes": result.get("wal_bytes_per_delivery"),
        "worker_cpu_us": each(result.get("worker_cpu_window_s"), 1e6),
    }


def summary(
    rounds: Sequence[Mapping[str, Any]], systems: Sequence[str], ref: str = "pgqueuer"
) -> dict[str, Any]:
    """Medians over rounds of each system's per-job figures, and medians of the per-round
    ratios system ÷ ``ref`` (ratios compare runs minutes apart)."""

    def fig(entry: Any, field: str) -> float | None:
        return ((entry or {}).get("per_job") or {}).get(field) if isinstance(entry, dict) else None

    def med(values: list[float | None]) -> float | None:
        clean = [v for v in values if v is not None]
        return statistics.median(clean) if clean else None

    present = [s for s in systems if any(isinstance(r.get(s), dict) for r in rounds)]
    medians = {s: {f: med([fig(r.get(s), f) for r in rounds]) for f in FIELDS} for s in present}
    ratios: dict[str, dict[str, float | None]] = {}
    for s in present:
        if s == ref:
            continue
        ratios[f"{s}/{ref}"] = {
            f: med(
                [
                    a / b
                    for r in rounds
                    if (a := fig(r.get(s), f)) is not None and (b := fig(r.get(ref), f))
                ]
            )
            for f in TARGETS
        }
    return {"median": medians, "ratios": ratios, "targets": TARGETS}
