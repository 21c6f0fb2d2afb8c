"""`make run PROFILE=lean`'s stack end to end: ``python -m chalicelib.local --profile lean``
on the test database, HTTP over loopback, a real delivery target.

In lean the worker and the scheduler run only as their Lambda handlers, which the local
EventBridge invokes at start and then once a period. Here the period is 300 s, so after
the first pass nothing is invoked again during the test: the one-pass scheduler functions
have made their pass (looking 75 s ahead) before the jobs exist, and a DELAYED run 5 s
ahead and a cron job's first tick can only be on time if the worker invocation started
at the first pass promotes and materializes them while it claims (the loops it hosts,
TE_WORKER_SCHEDULER_LOOPS). Without those loops both would wait for the next pass.

Cron ticks fall on minute boundaries (5-field expressions), and waiting for one would cost
the test up to a minute: the cron job is created through the API, then its first tick is
moved to 5 s ahead in the database, which is the state a job created 5 s before its first
tick is in (the materializer reads nothing else).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from chalicelib.db.connection import Database
from tests.support.environment import BOOTSTRAP_KEY, ENCRYPTION_KEY, PROFILE
from tests.support.served import HttpTarget, call_api, free_port, interruptible
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
#: Longer than the test: every delivery must come from the first pass's invocations.
PERIOD_SEC = 300
#: How long the lean worker invocation claims (80 s budget, 20 s margin).
CLAIM_SEC = 60


class LeanStack:
    """One `python -m chalicelib.local --profile lean` process and its log lines."""

    def __init__(self, db_url: str, data_dir: Path, port: int) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TE_")}
        env.update(
            PROFILE,
            TE_DATABASE_URL=db_url,
            TE_DATA_DIR=str(data_dir),
            TE_LISTEN_ADDR=f"127.0.0.1:{port}",
            TE_BOOTSTRAP_API_KEY=BOOTSTRAP_KEY,
            TE_SECRET_ENCRYPTION_KEY=ENCRYPTION_KEY,
            TE_ALLOW_PRIVATE_TARGETS="true",
            TE_WORKER_POLL_INTERVAL_MS="100",
            TE_LOG_FORMAT="json",
            TE_LOG_LEVEL="DEBUG",
            PYTHONUNBUFFERED="1",
        )
        self.base = f"http://127.0.0.1:{port}"
        command = [sys.executable, "-m", "chalicelib.local", "--profile", "lean"]
        self.proc = subprocess.Popen(
            [*command, "--schedule-period", str(PERIOD_SEC)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=interruptible,  # stop() sends Ctrl-C
        )
        self.output: list[str] = []
        self.banner = self._read_banner()
        self.started = time.time()  # the first pass starts now
        # Keep reading: a stack whose stdout pipe fills up blocks on its next log line.
        self._drain = threading.Thread(target=self._read_rest, daemon=True)
        self._drain.start()

    def _read_rest(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)

    def _read_banner(self) -> list[str]:
        deadline = time.monotonic() + 60
        assert self.proc.stdout is not None
        banner: list[str] = []
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError("stack exited early:\n" + "".join(self.output))
            self.output.append(line)
            if not line.startswith("{"):
                banner.append(line.strip())
            if line.startswith("API key: "):
                return banner
        raise AssertionError("no banner within 60 s:\n" + "".join(self.output))

    def events(self, name: str) -> list[dict[str, Any]]:
        found = []
        for line in list(self.output):
            if line.startswith("{") and f'"event": "{name}"' in line:
                found.append(json.loads(line))
        return found

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return call_api(self.base, BOOTSTRAP_KEY, method, path, body)

    def stop(self) -> int:
        """Ctrl-C; a stack that does not stop within 60 s is killed and the test fails."""
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise AssertionError("stack did not stop:\n" + "".join(self.output)) from None


def test_lean_delivers_near_term_work_on_time_from_the_worker_invocation(
    db_url: str, database: Database, http_target: HttpTarget, tmp_path: Path
) -> None:
    stack = LeanStack(db_url, tmp_path / "data", free_port())
    try:
        assert any(line.startswith("Profile: lean (") for line in stack.banner), stack.banner
        # The first pass: each function invoked once; the scheduler's have made their pass.
        passed = wait_for(
            lambda: {e["function"] for e in stack.events("scheduled_invocation")},
            "the first pass of the one-pass scheduler functions to return",
            until=lambda names: {"materialize_cron_ticks", "promote_delayed_executions"} <= names,
            timeout=30,
        )
        assert "run_worker" not in passed  # the worker invocation still claims

        status, _ = stack.call(
            "POST",
            "/endpoints",
            {
                "name": "near",
                "type": "HTTP",
                "spec": {"url": http_target.url("/near"), "method": "POST"},
            },
        )
        assert status == 201
        run_at = datetime.now(UTC) + timedelta(seconds=5)
        status, delayed = stack.call(
            "POST",
            "/jobs",
            {
                "endpoint": "near",
                "trigger": "DELAYED",
                "run_at": run_at.isoformat(),
                "idempotency_key": "delayed-1",
                "input": {"kind": "delayed"},
            },
        )
        assert status == 201, delayed
        status, cron = stack.call(
            "POST",
            "/jobs",
            {
                "endpoint": "near",
                "trigger": "CRON",
                "cron": "0 0 1 1 *",  # its own first tick far away: only the moved one comes
                "timezone": "UTC",
                "idempotency_key": "cron-1",
                "input": {"kind": "cron"},
            },
        )
        assert status == 201, cron
        first_tick = datetime.now(UTC) + timedelta(seconds=5)
        database.execute(
            "UPDATE jobs SET cron_next_run_at = :tick WHERE job_id = :job_id",
            tick=first_tick,
            job_id=cron["job_id"],
        )

        def kinds() -> dict[str, float]:
            return {r.json()["kind"]: r.at for r in http_target.received("/near")}

        arrived = wait_for(
            kinds,
            "the DELAYED run and the cron tick, from the worker invocation's hosted loops",
            until=lambda seen: {"delayed", "cron"} <= set(seen),
            # A guard, not the assertion: the next pass would come only after PERIOD_SEC.
            timeout=30,
        )
        assert arrived["delayed"] >= run_at.timestamp() - 0.5  # never early
        assert arrived["cron"] >= first_tick.timestamp() - 0.5
        assert max(arrived.values()) < stack.started + CLAIM_SEC < stack.started + PERIOD_SEC
        assert not stack.events("scheduled_invocation_failed")

        status, health = stack.call("GET", "/health")
        assert health["profile"] == "lean", health
    finally:
        assert stack.stop() == 0, "".join(stack.output)
    assert stack.events("eventbridge_stopped"), "".join(stack.output[-30:])
