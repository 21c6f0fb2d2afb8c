"""Plain ``chalice local`` (the Chalice user's habit) on a copy of the project.

It serves the API alone on the embedded database; its auto-reloader watches every file under
the project, so the database must live outside it (``.te-data`` is a link), the key of
``make run`` (the data dir's ``api-key``) must work, and unknown routes get the envelope.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.acceptance.test_local_stack import _postgres_processes
from tests.support.served import call_api, free_port, interruptible, wait_for_port
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]


def _copy_project(dest: Path) -> Path:
    dest.mkdir()
    shutil.copy2(ROOT / "app.py", dest / "app.py")
    for name in ("chalicelib", "migrations", ".chalice"):
        shutil.copytree(
            ROOT / name,
            dest / name,
            ignore=shutil.ignore_patterns("__pycache__", "deployments", "venv"),
        )
    return dest


@pytest.fixture
def project(tmp_path: Path) -> Path:
    os.chmod(tmp_path, 0o755)  # noqa: S103 - the embedded postgres OS user must reach it
    return _copy_project(tmp_path / "project")


def test_chalice_local_serves_the_api_with_the_local_key_and_never_reloads(
    project: Path, tmp_path: Path
) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TE_")}
    env.update(XDG_STATE_HOME=str(tmp_path / "state"), PYTHONUNBUFFERED="1")
    log_path = tmp_path / "chalice-local.log"
    chalice = Path(sys.executable).parent / "chalice"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [str(chalice), "--project-dir", str(project), "local", "--port", str(port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches the reloader and its child, as in a shell
            preexec_fn=interruptible,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_port(port, proc, timeout=60)
        status, body = call_api(base, "not-a-key", "GET", "/endpoints")
        assert status == 401, body
        data_dir = project / ".te-data"
        assert data_dir.is_symlink() and not data_dir.resolve().is_relative_to(project)
        key = (data_dir / "api-key").read_text().strip()
        # Several requests over a few seconds: the database writes beside them must not
        # make the reloader restart the server (it polls the project's files every second).
        for _ in range(8):
            status, body = call_api(base, key, "GET", "/endpoints")
            assert status == 200, body
            time.sleep(0.5)  # the scenario: requests spread over the reloader's polls
        for auth in (key, ""):
            status, body = call_api(base, auth, "GET", "/no/such/route")
            assert status == 404 and body["error"]["code"] == "ROUTE_NOT_FOUND", body
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    output = log_path.read_text()
    assert "Restarting local dev server" not in output, output
    pgdata = (project / ".te-data").resolve()
    wait_for(lambda: _postgres_processes(pgdata), "postgres to exit", until=lambda found: not found)
