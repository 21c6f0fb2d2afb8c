"""One Lambda execution environment as a host process: start, invoke, stop, logs.

The process is :mod:`.bootstrap` under the function's Python (``-I -S``: no site-packages,
no ``PYTHON*`` variables; the task root, the standard library and the runtime directory
are its whole path), with exactly the environment the Lambda service gives the function
plus ``AWS_LAMBDA_RUNTIME_API``, the task root and a private ``TMPDIR``. It talks to a
:class:`~.runtime_api.RuntimeApi` of its own. Its stdout and stderr are the function's
log; each invocation's share is framed as AWS frames it (``START``/``END``/``REPORT``).

As in AWS: an invocation that outlives its deadline ends with "Task timed out after N
seconds" and the process is killed; so does one whose process exits. The next invocation
starts a new process (a cold start).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path

from .bootstrap import END_MARKER
from .runtime_api import InitError, Invocation, Outcome, RuntimeApi

BOOTSTRAP = Path(__file__).resolve().parent / "bootstrap.py"
#: The PATH of the function's process (what the Lambda images put first is /var/lang/bin).
FUNCTION_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True, kw_only=True)
class FunctionSpec:
    """What it takes to run one function version as a host process."""

    python: str  #: the interpreter matching the function's runtime
    code_dir: Path  #: the unzipped deployment package (the task root)
    timeout_sec: float
    runtime_dir: Path | None = None  #: the runtime's own packages (boto3)
    guard_dir: Path | None = None  #: holds loopback_guard.py, installed before any code
    guard_report: str | None = None
    extra_env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Result:
    """An invocation's outcome as the Lambda service records it."""

    body: bytes
    is_error: bool
    logs: str


class StartupTimeout(Exception):
    """The runtime did not ask for its first invocation in time."""


class HostEnvironment:
    """One function process and its Runtime API; one invocation at a time."""

    def __init__(self, spec: FunctionSpec, env: Mapping[str, str]) -> None:
        self.spec = spec
        self.env = dict(env)
        self._lines: list[str] = []
        self._ended: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[str] | None = None
        self._api: RuntimeApi | None = None
        self._tmp: str | None = None

    # -- lifecycle -------------------------------------------------------------------
    def start(self, startup_timeout: float) -> None:
        """Spawn the runtime and wait until it asks for an invocation."""
        api = RuntimeApi()
        api.start()
        self._tmp = tempfile.mkdtemp(prefix="te-hostlambda-tmp-")
        self._api = api
        self._proc = subprocess.Popen(
            [self.spec.python, "-I", "-S", "-u", str(BOOTSTRAP), *self._guard_args()],
            cwd=self.spec.code_dir,
            env=self._function_env(api.address, self._tmp),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        threading.Thread(target=self._read_output, name="host-lambda-logs", daemon=True).start()
        self._wait_ready(api, startup_timeout)

    def _function_env(self, runtime_api: str, tmp: str) -> dict[str, str]:
        """What the Lambda service sets, the spec's extras, and where this process runs."""
        env = {
            **self.env,
            **self.spec.extra_env,
            "AWS_LAMBDA_RUNTIME_API": runtime_api,
            "LAMBDA_TASK_ROOT": str(self.spec.code_dir),
            "PATH": FUNCTION_PATH,
            "TMPDIR": tmp,
            "HOME": tmp,
        }
        if self.spec.runtime_dir:
            env["LAMBDA_RUNTIME_DIR"] = str(self.spec.runtime_dir)
        return env

    def _guard_args(self) -> list[str]:
        if self.spec.guard_dir is None:
            return []
        report = ["--guard-report", self.spec.guard_report] if self.spec.guard_report else []
        return ["--guard", str(self.spec.guard_dir), *report]

    def _wait_ready(self, api: RuntimeApi, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not api.ready.wait(0.05):
            if not self.running:
                raise InitError(self._exit_error("Runtime exited before it was ready"))
            if time.monotonic() > deadline:
                raise StartupTimeout(f"no runtime ready after {timeout:.0f} s:\n{self.logs()}")
        if api.init_error is not None:
            raise InitError(api.init_error)

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self) -> None:
        """Kill the process group, close the Runtime API, remove the private /tmp."""
        proc, api, tmp = self._proc, self._api, self._tmp
        self._proc = self._api = self._tmp = None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        if proc is not None:
            proc.wait(timeout=10)
        if api is not None:
            api.close()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)

    # -- invocations -----------------------------------------------------------------
    def invoke(
        self, request_id: str, payload: bytes, *, function_arn: str, trace_id: str
    ) -> Result:
        """Run one invocation to its end, its deadline or the process's exit."""
        if not self.running:
            self.stop()
            self.start(startup_timeout=max(self.spec.timeout_sec, 10.0))
        assert self._api is not None
        started = time.time()
        first_line = self._mark(f"START RequestId: {request_id} Version: $LATEST")
        ended = self._ended.setdefault(request_id, threading.Event())
        future = self._api.submit(
            Invocation(
                request_id=request_id,
                payload=payload,
                function_arn=function_arn,
                trace_id=trace_id,
                deadline_ms=int((started + self.spec.timeout_sec) * 1000),
            )
        )
        outcome = self._await(future, request_id, started)
        if outcome is not None:
            ended.wait(2)  # the output written before the answer is read
        result = outcome or self._failure(request_id, started)
        self._mark(f"END RequestId: {request_id}")
        duration_ms = (time.time() - started) * 1000
        self._mark(
            f"REPORT RequestId: {request_id}\tDuration: {duration_ms:.2f} ms\t"
            f"Billed Duration: {int(duration_ms) + 1} ms"
        )
        self._ended.pop(request_id, None)
        return Result(result.body, result.is_error, self._logs_since(first_line))

    def _await(self, future: Future[Outcome], request_id: str, started: float) -> Outcome | None:
        """The runtime's answer, or None when the deadline passed or the process died."""
        deadline = started + self.spec.timeout_sec
        while time.time() < deadline and self.running:
            try:
                return future.result(timeout=0.1)
            except FutureTimeout:
                continue
        if self._api is not None:
            self._api.forget(request_id)
        return future.result() if future.done() and not future.cancelled() else None

    def _failure(self, request_id: str, started: float) -> Outcome:
        """Timed out (killed, as AWS does) or exited: the error AWS reports for either."""
        if self.running:
            message = (
                f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {request_id} "
                f"Task timed out after {self.spec.timeout_sec:.2f} seconds"
            )
            self._mark(message)
            self.stop()
            body = json.dumps({"errorMessage": message}).encode()
        else:
            body = self._exit_error(f"RequestId: {request_id} Error: Runtime exited with error")
        return Outcome(request_id=request_id, body=body, is_error=True)

    def _exit_error(self, message: str) -> bytes:
        code = self._proc.poll() if self._proc is not None else None
        error = {"errorType": "Runtime.ExitError", "errorMessage": f"{message}: exit status {code}"}
        return json.dumps(error).encode()

    # -- logs ------------------------------------------------------------------------
    def _read_output(self) -> None:
        proc = self._proc
        if proc is None or proc.stdout is None:
            return
        for line in proc.stdout:
            if line.startswith(END_MARKER):
                event = self._ended.get(line[len(END_MARKER) :].strip())
                if event is not None:
                    event.set()
                continue
            self._mark(line.rstrip("\n"))

    def _mark(self, line: str) -> int:
        with self._lock:
            self._lines.append(line)
            return len(self._lines) - 1

    def _logs_since(self, index: int) -> str:
        with self._lock:
            return "\n".join(self._lines[index:]) + "\n"

    def logs(self) -> str:
        """Everything the environment's processes wrote, with the START/END/REPORT lines."""
        return self._logs_since(0)
