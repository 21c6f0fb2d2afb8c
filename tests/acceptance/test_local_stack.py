"""`make run`'s stack end to end: a real process, the embedded database, HTTP over loopback.

Starts ``python -m chalicelib.local`` with a fresh data dir and no TE_DATABASE_URL (so the
embedded PostgreSQL is started by the stack itself), creates an endpoint and an IMMEDIATE
job with plain HTTP requests, sees the delivery arrive at a real HTTP target, stops the stack
with SIGINT (Ctrl-C), checks nothing is left running, and starts it again on the same data.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from tests.support.served import HttpTarget, call_api, free_port, interruptible
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]


class Stack:
    """One `python -m chalicelib.local` process and what its banner said."""

    def __init__(self, data_dir: Path, port: int) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TE_")}
        env.update(
            TE_DATA_DIR=str(data_dir),
            TE_LISTEN_ADDR=f"127.0.0.1:{port}",
            TE_WORKER_POLL_INTERVAL_MS="100",
            PYTHONUNBUFFERED="1",
        )
        self.base = f"http://127.0.0.1:{port}"
        self.data_dir = data_dir
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "chalicelib.local"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=interruptible,  # stop() sends Ctrl-C
        )
        self.output: list[str] = []
        self.key = self._read_banner()
        # Keep reading: a stack whose stdout pipe fills up blocks on its next log line.
        self._drain = threading.Thread(target=self._read_rest, daemon=True)
        self._drain.start()

    def _read_rest(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)

    def _read_banner(self) -> str:
        deadline = time.monotonic() + 90
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError("stack exited early:\n" + "".join(self.output))
            self.output.append(line)
            if line.startswith("API key: "):
                return line.split(": ", 1)[1].strip()
        raise AssertionError("no banner within 90 s:\n" + "".join(self.output))

    def stop(self) -> int:
        """Ctrl-C, as a user stops it; a stack that does not stop in 60 s is killed, its
        embedded database stopped (it would outlive the session otherwise), and the test
        fails with the stack's output."""
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            for postgres in _postgres_processes(self.data_dir):
                postgres.send_signal(signal.SIGINT)  # fast shutdown
            raise AssertionError("stack did not stop:\n" + "".join(self.output)) from None


def _postgres_processes(data_dir: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        cmdline = " ".join(proc.info.get("cmdline") or [])
        if proc.info.get("name") == "postgres" and str(data_dir) in cmdline:
            found.append(proc)
    return found


@pytest.fixture
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = Path(tmp_path_factory.mktemp("stack")) / "data"
    os.chmod(path.parent, 0o755)  # noqa: S103 - the embedded postgres OS user must reach it
    return path


def test_local_stack_delivers_a_curl_created_job_and_restarts_on_its_data(
    data_dir: Path, http_target: HttpTarget
) -> None:
    port = free_port()
    stack = Stack(data_dir, port)
    try:
        status, _ = call_api(
            stack.base,
            stack.key,
            "POST",
            "/endpoints",
            {
                "name": "hello",
                "type": "HTTP",
                "spec": {
                    "url": http_target.url("/hello"),
                    "method": "POST",
                    "body_template": {"who": "{{input.who}}"},
                },
            },
        )
        assert status == 201
        status, job = call_api(
            stack.base,
            stack.key,
            "POST",
            "/jobs",
            {
                "endpoint": "hello",
                "trigger": "IMMEDIATE",
                "idempotency_key": "k1",
                "input": {"who": "world"},
            },
        )
        assert status == 201
        received = wait_for(lambda: http_target.received("/hello"), "the delivery", timeout=30)
        assert received[0].json() == {"who": "world"}
        execution_id = job["execution"]["execution_id"]
        wait_for(
            lambda: call_api(stack.base, stack.key, "GET", f"/executions/{execution_id}")[1],
            "the execution to succeed",
            until=lambda body: body["status"] == "SUCCESS",
            timeout=30,
        )
        status, body = call_api(stack.base, stack.key, "GET", "/no/such/route")
        assert status == 404 and body["error"]["code"] == "ROUTE_NOT_FOUND"
    finally:
        assert stack.stop() == 0
    wait_for(
        lambda: _postgres_processes(data_dir), "postgres to exit", until=lambda found: not found
    )

    again = Stack(data_dir, port)
    try:
        assert again.key == stack.key  # generated once, reused
        status, job_again = call_api(again.base, again.key, "GET", f"/jobs/{job['job_id']}")
        assert status == 200 and job_again["execution"]["status"] == "SUCCESS"
    finally:
        assert again.stop() == 0
    wait_for(
        lambda: _postgres_processes(data_dir), "postgres to exit", until=lambda found: not found
    )
