"""Shared helpers of the benchmark harness: paths, progress lines, statistics, machine facts."""

from __future__ import annotations

import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
WORK = BENCH / ".work"
RESULTS = BENCH / "results"
PROJECT_PY = ROOT / ".venv" / "bin" / "python"
BENCH_PY = WORK / "venv" / "bin" / "python"

_T0 = time.monotonic()


def progress(message: str) -> None:
    """One line per phase, with the elapsed time of the whole run."""
    elapsed = time.monotonic() - _T0
    print(f"[{elapsed:7.1f}s] {message}", flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def median(values: list[float]) -> float | None:
    clean = [v for v in values if v is not None]
    return statistics.median(clean) if clean else None


def percentile(values: list[float], pct: float) -> float | None:
    """Nearest-rank percentile (pct in 0..100)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(pct / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def summary_ms(values_s: list[float]) -> dict[str, float | int | None]:
    """p50/p95/p99/max in milliseconds of a list of seconds."""
    ms = [v * 1000 for v in values_s]
    return {
        "count": len(ms),
        "p50_ms": percentile(ms, 50),
        "p95_ms": percentile(ms, 95),
        "p99_ms": percentile(ms, 99),
        "max_ms": max(ms) if ms else None,
    }


def machine() -> dict[str, Any]:
    """The machine the figures were measured on."""
    model = "unknown"
    with open("/proc/cpuinfo", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem_kb = 0
    with open("/proc/meminfo", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("MemTotal"):
                mem_kb = int(line.split()[1])
    load = os.getloadavg()
    return {
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "ram_gib": round(mem_kb / 1024 / 1024, 1),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "loadavg_at_start": [round(x, 2) for x in load],
        "git_commit": _git("rev-parse", "--short", "HEAD"),
        # The processes under test run from the working tree: say when it differs from HEAD.
        "git_dirty": [
            line.split(None, 1)[1]
            for line in _git("status", "--porcelain", "--", "chalicelib", "app.py").splitlines()
            if line.strip()
        ],
    }


def _git(*args: str) -> str:
    try:
        out = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip()


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n", "utf-8")


def run_json(cmd: list[str], *, env: dict[str, str] | None = None, timeout: float) -> Any:
    """Run a helper script that prints one JSON document as its last stdout line."""
    proc = subprocess.run(
        cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False
    )
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout)[-2000:]
        raise RuntimeError(f"{' '.join(cmd[:3])} failed ({proc.returncode}):\n{tail}")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"{' '.join(cmd[:3])} printed no JSON:\n{proc.stdout[-2000:]}")
    return json.loads(lines[-1])
