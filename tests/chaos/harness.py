"""Service processes for chaos tests: real ``python -m`` workers and schedulers to kill.

:class:`Stack` starts the worker and scheduler entry points as subprocesses on the test's
database (the Fargate shape), SIGKILLs and restarts workers, and reads the figures the
invariants are stated in from the database.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chalicelib.db.connection import Database
from tests.chaos.figures import ROOT
from tests.support.environment import ENCRYPTION_KEY

TERMINAL = ("SUCCESS", "FAILED")


def service_env(db_url: str, **overrides: str) -> dict[str, str]:
    """The environment of a worker/scheduler process: nothing TE_* inherited."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TE_")}
    env.update(
        TE_DATABASE_URL=db_url,
        TE_SECRET_ENCRYPTION_KEY=ENCRYPTION_KEY,
        TE_ALLOW_PRIVATE_TARGETS="true",
        TE_WORKER_POLL_INTERVAL_MS="50",
        TE_STUCK_EXECUTION_TIMEOUT_SEC="5",
        TE_RECLAIM_INTERVAL_SEC="1",
        TE_LOG_LEVEL="WARNING",
    )
    env.update(overrides)
    return env


@dataclass
class Stack:
    """Worker and scheduler subprocesses; every process it starts is stopped by :meth:`close`."""

    db_url: str
    log_dir: Path
    env_overrides: dict[str, str] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    started: int = 0

    def start(self, role: str, module: str) -> None:
        self.started += 1
        log = (self.log_dir / f"{role}-{self.started}.log").open("wb")
        self.procs[role] = subprocess.Popen(
            [sys.executable, "-m", module],
            cwd=ROOT,
            env=service_env(self.db_url, **self.env_overrides),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()

    def kill(self, role: str) -> int:
        """SIGKILL (no drain, no finalize, nothing the process can do); returns its pid."""
        proc = self.procs.pop(role)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        return proc.pid

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        self.procs.clear()


def status_counts(db: Database) -> dict[str, int]:
    rows = db.run("SELECT status, count(*) AS n FROM executions GROUP BY status")
    return {str(r["status"]): int(r["n"]) for r in rows}


def held_by(db: Database, pid: int) -> int:
    """RUNNING executions leased by the worker process ``pid`` (worker ids are host-pid-rand)."""
    rows = db.run(
        "SELECT count(*) AS n FROM executions WHERE status = 'RUNNING' AND worker_id LIKE :p",
        p=f"%-{pid}-%",
    )
    return int(rows[0]["n"])


@dataclass
class KillReport:
    kills: int = 0
    in_flight_at_kills: int = 0
    in_flight_each: list[int] = field(default_factory=list)


def kill_worker_until_done(
    stack: Stack,
    db: Database,
    *,
    every_s: tuple[float, float],
    keep_killing: Callable[[dict[str, int]], bool],
    timeout_s: float,
) -> KillReport:
    """SIGKILL and restart the worker every ``every_s`` (random in the range, the first at
    its low end) while ``keep_killing(counts)``; then let it run until every execution is
    terminal (or ``timeout_s``)."""
    report = KillReport()
    deadline = time.monotonic() + timeout_s
    next_kill = time.monotonic() + every_s[0]
    while time.monotonic() < deadline:
        counts = status_counts(db)
        if not any(s not in TERMINAL for s in counts):
            return report
        if time.monotonic() >= next_kill and keep_killing(counts):
            pid = stack.kill("worker")
            # Read after the process is gone: its RUNNING rows are exactly what it held.
            held = held_by(db, pid)
            report.kills += 1
            report.in_flight_at_kills += held
            report.in_flight_each.append(held)
            stack.start("worker", "chalicelib.worker")
            next_kill = time.monotonic() + random.uniform(*every_s)
        time.sleep(0.1)
    raise AssertionError(f"executions still not terminal after {timeout_s}s: {status_counts(db)}")


@dataclass(frozen=True)
class DeliveryAccount:
    """What an HTTP target received, checked against the database after a chaos run."""

    created: int
    delivered: int
    duplicated: int
    lost: int
    stuck: int
    #: Deliveries beyond the attempts recorded for their execution. At-least-once repeats a
    #: delivery only as a new attempt: after a failed one (a timeout the target did
    #: receive) or a lost one (the reclaimer records a WORKER_LOST attempt for a worker
    #: that died, or whose result was not recorded before its lease ran out). Anything
    #: beyond that is a bug.
    beyond_attempts: int
    attempts_of_duplicated: dict[str, int]  #: by "SUCCESS" or "FAILED:<error type>"

    def figures(self, duration_s: float, **extra: Any) -> dict[str, Any]:
        return figures(
            created=self.created,
            delivered=self.delivered,
            duplicated=self.duplicated,
            lost=self.lost,
            stuck=self.stuck,
            duration_s=duration_s,
            deliveries_beyond_attempts=self.beyond_attempts,
            attempts_of_duplicated=self.attempts_of_duplicated,
            **extra,
        )


def account_deliveries(
    db: Database, ids: set[str], received: Mapping[str | None, int], counts: Mapping[str, int]
) -> DeliveryAccount:
    """Lost, stuck and duplicated executions of ``ids`` (``counts``: executions by status),
    and the attempts behind the repeated deliveries."""
    repeated = sorted(i for i, n in received.items() if i and n > 1)
    rows = db.run(
        "SELECT execution_id, status, error ->> 'type' AS error_type FROM attempts"
        " WHERE execution_id = ANY(CAST(:ids AS TEXT[]))",
        ids=repeated,
    )
    attempts = Counter(row["execution_id"] for row in rows)
    outcomes = Counter(
        row["status"] + (f":{row['error_type']}" if row["error_type"] else "") for row in rows
    )
    return DeliveryAccount(
        created=len(ids),
        delivered=len(ids & set(received)),
        duplicated=sum(n - 1 for n in received.values()),
        lost=len(ids - set(received)) + (len(ids) - counts.get("SUCCESS", 0)),
        stuck=sum(n for status, n in counts.items() if status not in TERMINAL),
        beyond_attempts=sum(max(0, received[i] - attempts[i]) for i in repeated),
        attempts_of_duplicated=dict(sorted(outcomes.items())),
    )


def figures(
    *,
    created: int,
    delivered: int,
    duplicated: int,
    lost: int,
    stuck: int,
    duration_s: float,
    **extra: Any,
) -> dict[str, Any]:
    """The common shape of every chaos figure file."""
    return {
        "created": created,
        "delivered": delivered,
        "duplicated": duplicated,
        "lost": lost,
        "stuck": stuck,
        "duration_s": round(duration_s, 1),
        **extra,
    }


def logged_totals(log_dir: Path, pattern: str, event: str, field_name: str) -> dict[str, int]:
    """Sum of ``field_name=N`` over the ``event`` lines of each service log matching
    ``pattern`` (text log format), by log file stem: what each process reported doing."""
    needle = re.compile(rf"\b{re.escape(field_name)}=(\d+)")
    totals: dict[str, int] = {}
    for path in sorted(log_dir.glob(pattern)):
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        values = [needle.search(line) for line in lines if f" {event} " in f"{line} "]
        totals[path.stem] = sum(int(m.group(1)) for m in values if m)
    return totals
