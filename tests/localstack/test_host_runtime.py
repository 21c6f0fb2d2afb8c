"""The host Lambda executor's core without LocalStack: one environment, its invocations.

:class:`HostEnvironment` starts :mod:`bootstrap` under this machine's Python for the
runtime, speaks the Runtime API with it, and frames each invocation's log as AWS does.
Shown here with small handlers: warm invocations, an error, a timeout (the process is
killed and the next invocation starts a new one), a failed import, a process that exits,
the path and environment a function sees, and the loopback guard inside it. The part that
imports LocalStack (executor.py, plugin.py) is exercised by test_localstack_guard.py and
the end-to-end tests.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.localstack.hostlambda.te_hostlambda import runtimes
from tests.localstack.hostlambda.te_hostlambda.environment import (
    FunctionSpec,
    HostEnvironment,
    Result,
)
from tests.localstack.hostlambda.te_hostlambda.runtime_api import InitError

GUARD_DIR = Path(__file__).resolve().parent / "guard"
RUNTIME = f"python{sys.version_info.major}.{sys.version_info.minor}"

HANDLER = """
import json, os, socket, sys, time

def handle(event, context):
    print("event", json.dumps(event))
    if event.get("fail"):
        raise ValueError("asked to fail")
    if event.get("sleep"):
        time.sleep(event["sleep"])
    if event.get("exit"):
        os._exit(3)
    if event.get("connect"):
        try:
            socket.create_connection((event["connect"], 80), timeout=1)
        except OSError as exc:
            return {"refused": str(exc)}
    import runtime_pkg
    return {
        "pid": os.getpid(),
        "request_id": context.aws_request_id,
        "function": context.function_name,
        "remaining_ms": context.get_remaining_time_in_millis(),
        "path0": sys.path[0],
        "site": "site" in sys.modules,
        "pythonpath": os.environ.get("PYTHONPATH"),
        "runtime_pkg": runtime_pkg.WHERE,
        "tmp": os.environ["TMPDIR"],
    }
"""


@pytest.fixture(scope="module")
def python() -> str:
    found = runtimes.find_python(RUNTIME)
    if found is None:
        pytest.skip(f"no {RUNTIME} interpreter outside a venv (pyenv or PATH)")
    return found


def _spec(tmp_path: Path, python: str, *, timeout: float = 5.0, **extra: Any) -> FunctionSpec:
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "handler.py").write_text(HANDLER)
    runtime_dir = tmp_path / "runtime"
    runtime_dir.mkdir(exist_ok=True)
    (runtime_dir / "runtime_pkg.py").write_text("WHERE = 'runtime dir'\n")
    return FunctionSpec(
        python=python, code_dir=code, timeout_sec=timeout, runtime_dir=runtime_dir, **extra
    )


def _env(handler: str = "handler.handle") -> dict[str, str]:
    return {
        "_HANDLER": handler,
        "AWS_LAMBDA_FUNCTION_NAME": "probe",
        "PYTHONPATH": "/should/not/matter",
    }


def _invoke(env: HostEnvironment, event: dict[str, Any]) -> tuple[Result, Any]:
    request_id = str(uuid.uuid4())
    result = env.invoke(
        request_id,
        json.dumps(event).encode(),
        function_arn="arn:aws:lambda:us-east-1:000000000000:function:probe",
        trace_id="Root=1-0-0",
    )
    return result, json.loads(result.body)


@pytest.fixture
def environment(tmp_path: Path, python: str) -> Any:
    started = HostEnvironment(_spec(tmp_path, python, timeout=1.5), _env())
    started.start(startup_timeout=30)
    yield started
    started.stop()


def test_warm_invocations_run_in_one_process_with_their_context(
    environment: HostEnvironment,
) -> None:
    first, body = _invoke(environment, {"n": 1})
    second, again = _invoke(environment, {"n": 2})
    assert not first.is_error and not second.is_error
    assert body["pid"] == again["pid"]
    assert body["function"] == "probe"
    assert 0 < body["remaining_ms"] <= 1500
    assert body["request_id"] != again["request_id"]
    lines = second.logs.splitlines()
    assert lines[0] == f"START RequestId: {again['request_id']} Version: $LATEST"
    assert lines[1] == 'event {"n": 2}'
    assert lines[2] == f"END RequestId: {again['request_id']}"
    assert lines[3].startswith(f"REPORT RequestId: {again['request_id']}\tDuration: ")


def test_the_function_sees_its_task_root_and_the_runtime_packages_only(
    environment: HostEnvironment, tmp_path: Path
) -> None:
    _, body = _invoke(environment, {})
    assert body["path0"] == str(tmp_path / "code")
    assert body["site"] is False  # no site-packages of the interpreter
    assert body["pythonpath"] == "/should/not/matter"  # in its environment, not on its path
    assert body["runtime_pkg"] == "runtime dir"
    assert body["tmp"] != "/tmp" and Path(body["tmp"]).is_dir()


def test_an_exception_is_an_error_result_and_the_process_stays(
    environment: HostEnvironment,
) -> None:
    _, before = _invoke(environment, {})
    result, error = _invoke(environment, {"fail": True})
    assert result.is_error
    assert (error["errorType"], error["errorMessage"]) == ("ValueError", "asked to fail")
    assert "Traceback" in result.logs
    _, after = _invoke(environment, {})
    assert after["pid"] == before["pid"]


def test_a_timeout_kills_the_process_and_the_next_invocation_starts_a_new_one(
    environment: HostEnvironment,
) -> None:
    _, before = _invoke(environment, {})
    result, error = _invoke(environment, {"sleep": 10})
    assert result.is_error
    assert error["errorMessage"].endswith("Task timed out after 1.50 seconds")
    assert "Task timed out" in result.logs
    _, after = _invoke(environment, {})
    assert after["pid"] != before["pid"]


def test_a_process_that_exits_is_a_runtime_exit_error(environment: HostEnvironment) -> None:
    result, error = _invoke(environment, {"exit": True})
    assert result.is_error
    assert error["errorType"] == "Runtime.ExitError"
    assert "exit status 3" in error["errorMessage"]


def test_a_handler_that_does_not_import_fails_the_start(tmp_path: Path, python: str) -> None:
    broken = HostEnvironment(_spec(tmp_path, python), _env("missing_module.handle"))
    try:
        with pytest.raises(InitError) as raised:
            broken.start(startup_timeout=30)
    finally:
        broken.stop()
    error = json.loads(raised.value.payload)
    assert error["errorType"] == "Runtime.ImportModuleError"
    assert "missing_module" in error["errorMessage"]


def test_the_loopback_guard_runs_inside_the_function(tmp_path: Path, python: str) -> None:
    report = tmp_path / "refused.jsonl"
    spec = _spec(tmp_path, python, guard_dir=GUARD_DIR, guard_report=str(report))
    guarded = HostEnvironment(spec, _env())
    guarded.start(startup_timeout=30)
    try:
        _, body = _invoke(guarded, {"connect": "192.0.2.123"})
    finally:
        guarded.stop()
    assert "loopback guard refused" in body["refused"]
    [line] = [json.loads(text) for text in report.read_text().splitlines()]
    assert (line["function"], line["process"]) == ("probe", "bootstrap.py")


def _fake_python(path: Path, version: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho {version}\n")
    path.chmod(0o755)


def test_the_runtime_runs_on_the_newest_patch_release_of_its_python(tmp_path: Path) -> None:
    assert runtimes.runtime_version("python3.12") == "3.12"
    assert runtimes.runtime_version("nodejs20.x") is None
    pyenv = tmp_path / "pyenv"
    for name in ("3.12.1", "3.12.10", "3.12.9", "3.13.0"):
        _fake_python(pyenv / "versions" / name / "bin" / "python3.12", name.replace(".", " "))
    found = runtimes.pyenv_candidates("3.12", pyenv)
    assert [p.parents[1].name for p in found] == ["3.12.10", "3.12.9", "3.12.1"]
    # A newer patch release on PATH wins over pyenv's (and an older one loses to them).
    _fake_python(tmp_path / "bin" / "python3.12", "3 12 11")
    _fake_python(tmp_path / "old" / "python3.12", "3 12 2")
    newest = runtimes.find_python(
        "python3.12", {"PYENV_ROOT": str(pyenv), "PATH": str(tmp_path / "bin")}
    )
    assert newest == str(tmp_path / "bin" / "python3.12")
    older = runtimes.find_python(
        "python3.12", {"PYENV_ROOT": str(pyenv), "PATH": str(tmp_path / "old")}
    )
    assert older == str(pyenv / "versions" / "3.12.10" / "bin" / "python3.12")
    assert runtimes.find_python("nodejs20.x") is None
