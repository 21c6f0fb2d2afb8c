"""The runtime of one host-process Lambda function: the client side of the Lambda Runtime API.

Run by :mod:`.environment` as ``python -I -S -u bootstrap.py [--guard DIR] [--guard-report
FILE]`` under the Python the function's runtime names, with the function's environment
(``_HANDLER``, ``LAMBDA_TASK_ROOT``, ``LAMBDA_RUNTIME_DIR``, ``AWS_LAMBDA_RUNTIME_API``,
the ``AWS_*`` variables and the function's own). What AWS's Python runtime does, reduced
to what a function here needs:

1. install the loopback guard (``--guard``) before any code of the function runs;
2. ``sys.path``: the task root, the interpreter's standard library, then the runtime
   directory (boto3 and its dependencies, as AWS's runtime provides them);
3. import the handler (``module.attr``); a failure is reported to
   ``/runtime/init/error`` and ends the process, as ``Runtime.ImportModuleError``;
4. loop: ``GET /runtime/invocation/next``, call the handler with the event and a context,
   ``POST .../response`` (JSON) or ``.../error``.

After each invocation it prints :data:`END_MARKER` and the request id on stdout, so the
executor knows the invocation's output has all arrived. Standard library only.
"""

from __future__ import annotations

import http.client
import importlib
import json
import os
import sys
import threading
import time
import traceback
from typing import Any

API_VERSION = "2018-06-01"
#: Printed (with the request id) after an invocation's output; the executor strips it.
END_MARKER = "\x1e te-hostlambda invocation-end"


class LambdaContext:
    """The ``context`` argument of a handler (the attributes AWS's Python runtime sets)."""

    def __init__(self, headers: dict[str, str], env: dict[str, str]) -> None:
        self.aws_request_id = headers.get("lambda-runtime-aws-request-id", "")
        self.invoked_function_arn = headers.get("lambda-runtime-invoked-function-arn", "")
        self._deadline_ms = int(headers.get("lambda-runtime-deadline-ms") or 0)
        self.function_name = env.get("AWS_LAMBDA_FUNCTION_NAME", "")
        self.function_version = env.get("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        self.memory_limit_in_mb = env.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
        self.log_group_name = env.get("AWS_LAMBDA_LOG_GROUP_NAME", "")
        self.log_stream_name = env.get("AWS_LAMBDA_LOG_STREAM_NAME", "")
        self.identity = None
        self.client_context = None

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self._deadline_ms - int(time.time() * 1000))


class RuntimeApiClient:
    """HTTP/1.1 to the executor's Runtime API (``AWS_LAMBDA_RUNTIME_API``, on loopback)."""

    def __init__(self, address: str) -> None:
        host, _, port = address.rpartition(":")
        self.host, self.port = host, int(port)

    def _request(
        self, method: str, path: str, body: bytes | None = None
    ) -> tuple[dict[str, str], bytes]:
        # No timeout: `next` waits as long as the environment has no invocation.
        connection = http.client.HTTPConnection(self.host, self.port)
        try:
            connection.request(method, f"/{API_VERSION}{path}", body=body)
            response = connection.getresponse()
            headers = {name.lower(): value for name, value in response.getheaders()}
            return headers, response.read()
        finally:
            connection.close()

    def next(self) -> tuple[dict[str, str], bytes]:
        return self._request("GET", "/runtime/invocation/next")

    def respond(self, request_id: str, body: bytes) -> None:
        self._request("POST", f"/runtime/invocation/{request_id}/response", body)

    def fail(self, request_id: str, error: dict[str, Any]) -> None:
        self._request("POST", f"/runtime/invocation/{request_id}/error", _json(error))

    def init_error(self, error: dict[str, Any]) -> None:
        self._request("POST", "/runtime/init/error", _json(error))


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()


def error_body(exc: BaseException, error_type: str | None = None) -> dict[str, Any]:
    """The error document AWS's Python runtime sends (``errorMessage``, ``errorType``, ...)."""
    return {
        "errorMessage": str(exc),
        "errorType": error_type or type(exc).__name__,
        "requestId": "",
        "stackTrace": traceback.format_tb(exc.__traceback__),
    }


def install_guard(argv: list[str]) -> None:
    """``--guard DIR [--guard-report FILE]``: the loopback guard, before the function's code."""
    if "--guard" not in argv:
        return
    guard_dir = argv[argv.index("--guard") + 1]
    report = argv[argv.index("--guard-report") + 1] if "--guard-report" in argv else None
    sys.path.insert(0, guard_dir)
    try:
        import loopback_guard
    finally:
        sys.path.remove(guard_dir)
    loopback_guard.install(report)


def set_path(env: dict[str, str]) -> None:
    """The task root first, the runtime's packages (boto3) after the standard library."""
    task_root = env.get("LAMBDA_TASK_ROOT", os.getcwd())
    runtime_dir = env.get("LAMBDA_RUNTIME_DIR")
    stdlib = [entry for entry in sys.path if entry]
    sys.path[:] = [task_root, *stdlib, *([runtime_dir] if runtime_dir else [])]


def load_handler(name: str) -> Any:
    """``package.module.attr`` -> the callable (AWS's runtime: ``module.function``)."""
    module_name, _, attr = name.rpartition(".")
    if not module_name:
        raise ValueError(f"Bad handler {name!r}: expected module.function")
    return getattr(importlib.import_module(module_name.replace("/", ".")), attr)


def serve(client: RuntimeApiClient, handler: Any, env: dict[str, str]) -> None:
    """The invocation loop: runs until the executor stops the process."""
    while True:
        headers, body = client.next()
        context = LambdaContext(headers, env)
        request_id = context.aws_request_id
        try:
            event = json.loads(body) if body else {}
            result = handler(event, context)
            payload = _json(result)
        except Exception as exc:
            traceback.print_exc()
            _invocation_ended(request_id)
            client.fail(request_id, error_body(exc))
            continue
        _invocation_ended(request_id)
        client.respond(request_id, payload)


def _invocation_ended(request_id: str) -> None:
    sys.stderr.flush()
    print(f"{END_MARKER} {request_id}", flush=True)


def exit_with_parent(interval: float = 1.0) -> None:
    """End this process when the executor's process is gone (even killed by SIGKILL): the
    runtime runs in a session of its own, so no signal of the parent's group reaches it."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def main(argv: list[str]) -> int:
    exit_with_parent()
    install_guard(argv)
    env = dict(os.environ)
    set_path(env)
    client = RuntimeApiClient(env["AWS_LAMBDA_RUNTIME_API"])
    try:
        handler = load_handler(env.get("_HANDLER", ""))
    except Exception as exc:
        traceback.print_exc()
        kind = "Runtime.ImportModuleError" if isinstance(exc, ImportError) else None
        client.init_error(error_body(exc, kind))
        return 1
    serve(client, handler, env)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
