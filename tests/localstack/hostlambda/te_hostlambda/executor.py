"""LocalStack's side: a ``RuntimeExecutor`` that runs each environment as a host process.

LocalStack (``localstack.services.lambda_.invocation``) builds one executor per execution
environment and calls ``start(env_vars)``, ``invoke(payload)`` (``invoke-id``,
``invoked-function-arn``, ``payload``, ``trace-id``) and ``stop()``; ``prepare_version``
once per function version. Its Docker executor starts a container whose runtime-init
serves the Runtime API and posts results back to LocalStack; here
:class:`~.environment.HostEnvironment` does both in this process, and ``invoke`` returns
the result directly. Only ``python3.x`` zip functions run (each under the matching Python
this machine has); anything else fails at ``prepare_version`` with the reason.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from localstack import config
from localstack.aws.api.lambda_ import PackageType
from localstack.services.lambda_.invocation.executor_endpoint import StatusErrorException
from localstack.services.lambda_.invocation.lambda_models import FunctionVersion, InvocationResult
from localstack.services.lambda_.invocation.runtime_executor import (
    LambdaRuntimeException,
    RuntimeExecutor,
)
from localstack.utils.strings import to_bytes

from .environment import FunctionSpec, HostEnvironment
from .runtime_api import InitError
from .runtimes import find_python, runtime_packages_dir

LOG = logging.getLogger(__name__)
LOOPBACK = "127.0.0.1"
#: Settings every function process gets besides what LocalStack sets (nothing may reach
#: the instance metadata address for credentials: LocalStack's are in the environment).
FUNCTION_SETTINGS = {"AWS_EC2_METADATA_DISABLED": "true", "LANG": "C.UTF-8"}


def _guard() -> tuple[Path | None, str | None]:
    """The loopback guard of this process (sitecustomize), handed to every function."""
    try:
        import loopback_guard
    except ImportError:
        LOG.warning(
            "host Lambda executor: no loopback guard in this process; functions run without"
        )
        return None, None
    return Path(loopback_guard.__file__).parent, os.environ.get(loopback_guard.REPORT_ENV)


def _runtime_dir() -> Path:
    return runtime_packages_dir(Path(config.dirs.tmp) / "host-lambda-runtime")


def function_spec(function_version: FunctionVersion) -> FunctionSpec:
    """How to run ``function_version`` here; LambdaRuntimeException when it cannot run."""
    cfg = function_version.config
    if cfg.package_type != PackageType.Zip or not cfg.code:
        raise LambdaRuntimeException("the host executor runs zip packages only")
    python = find_python(cfg.runtime or "")
    if python is None:
        raise LambdaRuntimeException(
            f"runtime {cfg.runtime!r}: no matching Python on this machine "
            "(pyenv versions, or pythonX.Y on PATH)"
        )
    guard_dir, report = _guard()
    return FunctionSpec(
        python=python,
        code_dir=Path(cfg.code.get_unzipped_code_location()),
        timeout_sec=float(cfg.timeout),
        runtime_dir=_runtime_dir(),
        guard_dir=guard_dir,
        guard_report=report,
        extra_env=FUNCTION_SETTINGS,
    )


class HostRuntimeExecutor(RuntimeExecutor):
    """One execution environment: a host process running the function's handler."""

    def __init__(self, id: str, function_version: FunctionVersion) -> None:
        super().__init__(id=id, function_version=function_version)
        self.environment: HostEnvironment | None = None

    def start(self, env_vars: dict[str, str]) -> None:
        env = {key: str(value) for key, value in env_vars.items()}
        self.environment = HostEnvironment(function_spec(self.function_version), env)
        try:
            self.environment.start(startup_timeout=config.LAMBDA_RUNTIME_ENVIRONMENT_TIMEOUT)
        except InitError as exc:
            raise StatusErrorException("Environment startup failed", exc.payload) from exc

    def stop(self) -> None:
        if self.environment is not None:
            self.environment.stop()

    def get_address(self) -> str:
        return LOOPBACK

    def get_endpoint_from_executor(self) -> str:
        return LOOPBACK

    def get_runtime_endpoint(self) -> str:
        port = config.GATEWAY_LISTEN[0].port
        return f"http://{LOOPBACK}:{port}/_localstack_lambda/{self.id}"

    def invoke(self, payload: dict[str, str]) -> InvocationResult:
        if self.environment is None:
            raise LambdaRuntimeException(f"environment {self.id} was not started")
        request_id = payload["invoke-id"]
        result = self.environment.invoke(
            request_id,
            to_bytes(payload["payload"]),
            function_arn=payload["invoked-function-arn"],
            trace_id=payload.get("trace-id", ""),
        )
        return InvocationResult(request_id, result.body, result.is_error, result.logs)

    def get_logs(self) -> str:
        return self.environment.logs() if self.environment is not None else ""

    @classmethod
    def prepare_version(cls, function_version: FunctionVersion) -> None:
        if function_version.config.code:
            function_version.config.code.prepare_for_execution()
        function_spec(function_version)  # fails the version now if it cannot run here

    @classmethod
    def cleanup_version(cls, function_version: FunctionVersion) -> None:
        return None

    @classmethod
    def validate_environment(cls) -> bool:
        return True
