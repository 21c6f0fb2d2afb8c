"""Physical reference: pgbench TPC-B-like, 2 clients, on the benchmark server."""

from __future__ import annotations

import re
import subprocess

from common import progress
from pgserver import SOCKET_DIR, PgServer

DATABASE = "bench_pgbench"
SCALE = 10


def prepare(server: PgServer) -> None:
    server.recreate(DATABASE)
    subprocess.run(
        [str(server.bin / "pgbench"), "-i", "-q", "-s", str(SCALE), *_conn(server), DATABASE],
        check=True,
        capture_output=True,
        timeout=300,
    )


def _conn(server: PgServer) -> list[str]:
    return ["-h", str(SOCKET_DIR), "-p", str(server.port), "-U", "postgres"]


def run(server: PgServer, seconds: int = 15, clients: int = 2) -> float:
    """TPS (excluding connection time) of one pgbench run."""
    out = subprocess.run(
        [
            str(server.bin / "pgbench"),
            "-c",
            str(clients),
            "-j",
            str(clients),
            "-T",
            str(seconds),
            "-n",
            *_conn(server),
            DATABASE,
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=seconds + 120,
    ).stdout
    match = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", out)
    if not match:
        raise RuntimeError(f"cannot parse pgbench output:\n{out}")
    tps = float(match.group(1))
    progress(f"pgbench TPC-B-like, {clients} clients, {seconds}s: {tps:.0f} TPS")
    return tps
