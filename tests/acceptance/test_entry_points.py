"""The command-line entry points: usage without side effects, one-line errors, safe defaults."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from chalicelib.local.server import prepare_environment

ROOT = Path(__file__).resolve().parents[2]
ENTRY_POINTS = [
    "chalicelib.worker",
    "chalicelib.scheduler",
    "chalicelib.migrate",
    "chalicelib.local",
]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TE_")}
    # A database nobody serves: touching it would hang or fail, never print usage.
    env.update(
        TE_DATABASE_URL="postgresql://nobody@127.0.0.1:9/none",
        TE_DATA_DIR=str(tmp_path / "data"),
        XDG_STATE_HOME=str(tmp_path / "state"),
        **extra,
    )
    return env


@pytest.mark.parametrize("module", ENTRY_POINTS)
def test_help_prints_usage_and_exits_without_touching_the_database(
    module: str, tmp_path: Path
) -> None:
    env = _env(tmp_path)
    del env["TE_DATABASE_URL"]  # unset: starting for real would start the embedded database
    result = subprocess.run(
        [sys.executable, "-m", module, "--help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: python -m {module}"), result.stdout
    assert not (tmp_path / "data").exists() and not (tmp_path / "state").exists()


def test_a_busy_port_is_one_line_naming_the_port_and_the_setting(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "chalicelib.local"],
            cwd=ROOT,
            env=_env(tmp_path, TE_LISTEN_ADDR=f"127.0.0.1:{port}"),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(port) in lines[0] and "TE_LISTEN_ADDR" in lines[0]
    assert "Traceback" not in result.stdout + result.stderr
    assert not (tmp_path / "data" / "pg").exists()  # nothing was started


def test_make_run_listens_on_loopback_by_default() -> None:
    env: dict[str, str] = {}
    prepare_environment(env)
    assert env["TE_LISTEN_ADDR"] == "127.0.0.1:8080"
    assert env["TE_LOCAL_MODE"] == "true"
    explicit = {"TE_LISTEN_ADDR": "0.0.0.0:9000"}
    prepare_environment(explicit)
    assert explicit["TE_LISTEN_ADDR"] == "0.0.0.0:9000"


def test_the_local_data_link_is_ignored_by_git() -> None:
    # .te-data is a symlink (chalicelib/local/data.py): a `.te-data/` pattern misses it.
    result = subprocess.run(["git", "check-ignore", "-q", ".te-data"], cwd=ROOT, check=False)
    assert result.returncode == 0


@pytest.mark.parametrize(("cli_mode", "imported"), [(None, False), ("true", True)])
def test_the_deployed_app_imports_nothing_of_the_local_stack(
    tmp_path: Path, cli_mode: str | None, imported: bool
) -> None:
    """Lambda imports ``app.py`` without Chalice's CLI: not one module of
    ``chalicelib.local`` (the local server, its framing, the data directory) is loaded.
    ``chalice local`` (AWS_CHALICE_CLI_MODE) loads the server's adaptation, and only it."""
    env = _env(tmp_path)
    env.pop("AWS_CHALICE_CLI_MODE", None)
    if cli_mode is not None:
        env["AWS_CHALICE_CLI_MODE"] = cli_mode
    code = (
        "import sys, app; print(sorted(m for m in sys.modules if m.startswith('chalicelib.local')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert ("chalicelib.local.server" in out.stdout) is imported, out.stdout
    if not imported:
        assert out.stdout.strip() == "[]"
