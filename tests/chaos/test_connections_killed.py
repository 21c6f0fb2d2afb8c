"""Fault 3: the service's database sessions killed repeatedly (``pg_terminate_backend``).

While ``python -m chalicelib.worker`` and ``python -m chalicelib.scheduler`` deliver
``TE_CHAOS_N`` (default 10,000) IMMEDIATE executions to a local HTTP target, every session
on the test database is terminated every 1-3 s. The processes must reconnect by themselves:
0 lost, 0 left non-terminal, and no process exits.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from pathlib import Path

import pytest

from chalicelib.db.connection import Database
from chalicelib.errors import DatabaseError
from tests.chaos.figures import chaos_n, write_figures
from tests.chaos.harness import (
    TERMINAL,
    Stack,
    account_deliveries,
    status_counts,
)
from tests.support.pg import PgServer
from tests.support.seed.worker import http_spec, retry_policy, seed
from tests.support.served import HttpTarget

pytestmark = pytest.mark.chaos

EXECUTION_HEADER = "x-task-executor-execution-id"


def terminate_sessions(pg_server: PgServer, db_name: str) -> int:
    """Terminate every backend on ``db_name`` (from an admin session on another database)."""
    admin = pg_server.admin()
    try:
        rows = admin.run(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = :db AND pid <> pg_backend_pid()",
            db=db_name,
        )
    finally:
        admin.close()
    return int(rows[0][0])


def _pending(db: Database) -> dict[str, int]:
    for _ in range(20):  # our own pool is a victim too: read again after a reconnect
        try:
            return status_counts(db)
        except DatabaseError:
            time.sleep(0.1)
    return status_counts(db)


def test_killed_sessions_lose_nothing(
    database: Database, db_url: str, pg_server: PgServer, http_target: HttpTarget, tmp_path: Path
) -> None:
    total = chaos_n(10_000)
    db_name = db_url.split("?", 1)[0].rsplit("/", 1)[1]
    seeded = seed(
        database,
        spec=http_spec(http_target.url("/hook")),
        policy=retry_policy(max_attempts=20),
        inputs=[{"user_id": f"u{i}"} for i in range(total)],
    )
    stack = Stack(db_url, tmp_path)
    started = time.monotonic()
    rounds = terminated = 0
    stack.start("scheduler", "chalicelib.scheduler")
    stack.start("worker", "chalicelib.worker")
    try:
        deadline = started + max(600.0, total / 5)
        while any(s not in TERMINAL for s in _pending(database)):
            assert time.monotonic() < deadline, _pending(database)
            exited = {r: p.returncode for r, p in stack.procs.items() if p.poll() is not None}
            assert exited == {}, f"service processes exited: {exited}"
            if _pending(database).get("QUEUED", 0) > 0:
                terminated += terminate_sessions(pg_server, db_name)
                rounds += 1
            time.sleep(random.uniform(1.0, 3.0))
    finally:
        stack.close()
    duration = time.monotonic() - started

    received = Counter(r.headers.get(EXECUTION_HEADER) for r in http_target.received("/hook"))
    counts = _pending(database)
    account = account_deliveries(database, set(seeded.execution_ids), received, counts)
    write_figures(
        "connections_killed",
        account.figures(
            duration, kill_rounds=rounds, sessions_terminated=terminated, statuses=counts
        ),
    )

    assert rounds >= 1 and terminated >= 1
    assert (account.lost, account.stuck) == (0, 0), counts
    assert account.beyond_attempts == 0, "a delivery was repeated without an attempt"
