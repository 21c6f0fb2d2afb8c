"""No server started by a test session outlives it: on a normal end, Ctrl-C or SIGTERM.

Runs an inner pytest session (tests/support/probe_servers.py) that starts every kind of
server the fixtures start, tagged by a unique environment variable that every process it
starts inherits (PostgreSQL through pg_ctl included); after the session has ended, no
process carrying the tag may be left, and none of its ports may answer.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.support.served import interruptible
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
MARK = "PROBE_SESSION_MARK"  # not TE_*: the stack passes on everything else


def _tagged_processes(tag: str) -> list[int]:
    needle = f"{MARK}={tag}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue  # gone, or not ours to read
        if needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _up(path: Path, proc: subprocess.Popen[bytes]) -> bool:
    assert proc.poll() is None, "the inner session ended before its servers were up"
    return path.exists()


def _stack_log(ready: Path) -> str:
    path = Path(f"{ready}.stack.log")
    return path.read_text()[-3000:] if path.exists() else ""


@pytest.mark.parametrize("ending", ["completes", "SIGINT", "SIGTERM"])
def test_no_server_outlives_the_session(ending: str, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex
    ready = tmp_path / "ready.json"
    inner_log = tmp_path / "inner.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TE_")}
    env.update({MARK: tag, "TE_TEST_PROBE_READY": str(ready)})
    if ending != "completes":
        env["TE_TEST_PROBE_HOLD"] = "1"
    with inner_log.open("w") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                # Its own temp root: pytest prunes old basetemps, this session's included.
                f"--basetemp={tmp_path / 'inner'}",
                "tests/support/probe_servers.py",
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=interruptible,  # the Ctrl-C below must reach it
        )
    try:
        wait_for(
            lambda: _up(ready, proc),
            "the inner session's servers to come up",
            timeout=180,
            interval=0.2,
        )
        if ending != "completes":
            proc.send_signal(getattr(signal, ending))
        returncode = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    # pytest's exit codes: 0 all passed, 2 interrupted (not 1: a test, e.g. a stack that
    # would not stop, failed).
    expected = 0 if ending == "completes" else 2
    assert returncode == expected, (inner_log.read_text()[-3000:], _stack_log(ready))
    ports = json.loads(ready.read_text())["ports"]
    assert _tagged_processes(tag) == []
    assert [p for p in ports if _answers(p)] == []
