"""The plux plugin LocalStack loads by name: ``LAMBDA_RUNTIME_EXECUTOR=host``.

Registered under the entry point group ``localstack.lambda.runtime_executor`` (this
package's pyproject.toml); LocalStack's ``get_runtime_executor`` loads it and calls
``load()`` for the executor class.
"""

from __future__ import annotations

from typing import Any

from localstack.services.lambda_.invocation.plugins import RuntimeExecutorPlugin


class HostRuntimeExecutorPlugin(RuntimeExecutorPlugin):
    """Runs Lambda functions as host processes (no Docker)."""

    name = "host"

    def load(self, *args: Any, **kwargs: Any) -> Any:
        from .executor import HostRuntimeExecutor

        return HostRuntimeExecutor
