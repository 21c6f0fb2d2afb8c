"""Per-second CPU split between processes while a benchmark runs (where the cores go).

Usage: python bench/experiments/cpu_split.py SECONDS   (start it beside a throughput run)

Prints, once a second, the CPU ticks (1/100 s) each process group used in that second:
``worker`` (python -m chalicelib.worker), ``postgres``, ``nginx``, other Python processes
by script name. 100 ticks per second is one core fully busy. Reads /proc only (Linux).
"""

from __future__ import annotations

import collections
import os
import sys
import time


def snapshot() -> collections.Counter[str]:
    """Cumulative user+system ticks per process group."""
    totals: collections.Counter[str] = collections.Counter()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().split(b"\0")
        except OSError:
            continue  # the process ended meanwhile
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        ticks = int(fields[11]) + int(fields[12])  # utime + stime
        if comm.startswith("kworker"):
            continue  # kernel workers rename themselves; their counters are not per second
        if comm.startswith("python"):
            script = cmdline[1].decode(errors="replace") if len(cmdline) > 1 else ""
            comm = "worker" if b"chalicelib.worker" in cmdline else f"py:{script[-30:]}"
        totals[comm] += ticks
    return totals


def main(seconds: int) -> None:
    before = snapshot()
    for second in range(seconds):
        time.sleep(1)
        now = snapshot()
        used = {k: now[k] - before.get(k, 0) for k in now if now[k] - before.get(k, 0) > 3}
        print(second, sorted(used.items(), key=lambda kv: -kv[1]), flush=True)
        before = now


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
