"""Every operation of the OpenAPI document has an SDK method (te/client.py) and a ``te``
command (te/cli/): a new route fails this test until both exist and are listed here."""

from __future__ import annotations

from typing import Any

import click
import pytest

from chalicelib.api.openapi import openapi_document
from te.cli import main
from te.client import Client

METHODS = {"get", "put", "post", "delete", "patch"}

#: operationId -> (the SDK method as a dotted path from a Client, the ``te`` command words).
COVERAGE: dict[str, tuple[str, tuple[str, ...]]] = {
    "createPayloadSpec": ("payload_specs.create", ("payload-specs", "create")),
    "listPayloadSpecs": ("payload_specs.list", ("payload-specs", "list")),
    "getPayloadSpec": ("payload_specs.get", ("payload-specs", "get")),
    "updatePayloadSpec": ("payload_specs.replace", ("payload-specs", "update")),
    "deletePayloadSpec": ("payload_specs.delete", ("payload-specs", "delete")),
    "createConfig": ("configs.create", ("configs", "create")),
    "listConfigs": ("configs.list", ("configs", "list")),
    "getConfig": ("configs.get", ("configs", "get")),
    "updateConfig": ("configs.replace", ("configs", "update")),
    "deleteConfig": ("configs.delete", ("configs", "delete")),
    "createSecret": ("secrets.create", ("secrets", "create")),
    "listSecrets": ("secrets.list", ("secrets", "list")),
    "getSecret": ("secrets.get", ("secrets", "get")),
    "updateSecret": ("secrets.replace", ("secrets", "update")),
    "deleteSecret": ("secrets.delete", ("secrets", "delete")),
    "createEndpoint": ("endpoints.create", ("endpoints", "create")),
    "listEndpoints": ("endpoints.list", ("endpoints", "list")),
    "getEndpoint": ("endpoints.get", ("endpoints", "get")),
    "updateEndpoint": ("endpoints.replace", ("endpoints", "update")),
    "deleteEndpoint": ("endpoints.delete", ("endpoints", "delete")),
    "pauseEndpoint": ("endpoints.pause", ("endpoints", "pause")),
    "resumeEndpoint": ("endpoints.resume", ("endpoints", "resume")),
    "redriveEndpoint": ("endpoints.redrive", ("endpoints", "redrive")),
    "createTopic": ("topics.create", ("topics", "create")),
    "listTopics": ("topics.list", ("topics", "list")),
    "getTopic": ("topics.get", ("topics", "get")),
    "updateTopic": ("topics.replace", ("topics", "update")),
    "deleteTopic": ("topics.delete", ("topics", "delete")),
    "listOrderingKeys": ("endpoints.blocked_keys", ("endpoints", "blocked-keys")),
    "skipOrderingKey": ("endpoints.skip_key", ("endpoints", "skip-key")),
    "createJob": ("jobs.create", ("jobs", "create")),
    "listJobs": ("jobs.list", ("jobs", "list")),
    "getJob": ("jobs.get", ("jobs", "get")),
    "updateJob": ("jobs.update", ("jobs", "update")),
    "cancelJob": ("jobs.cancel", ("jobs", "cancel")),
    "pauseJob": ("jobs.pause", ("jobs", "pause")),
    "resumeJob": ("jobs.resume", ("jobs", "resume")),
    "triggerJob": ("jobs.trigger", ("jobs", "trigger")),
    "getJobStatus": ("jobs.status", ("jobs", "status")),
    "listJobVersions": ("jobs.versions", ("jobs", "versions")),
    "listJobExecutions": ("jobs.executions", ("jobs", "executions")),
    "createBatch": ("jobs.create_batch", ("batch", "create")),
    "getBatch": ("batches.get", ("batch", "get")),
    "listBatchJobs": ("batches.jobs", ("batch", "jobs")),
    "cancelBatch": ("batches.cancel", ("batch", "cancel")),
    "listExecutions": ("executions.list", ("executions", "list")),
    "getExecution": ("executions.get", ("executions", "get")),
    "listAttempts": ("executions.attempts", ("executions", "attempts")),
    "listExecutionLogs": ("executions.logs", ("executions", "logs")),
    "cancelExecution": ("executions.cancel", ("executions", "cancel")),
    "retryExecution": ("executions.retry", ("executions", "retry")),
    "createBulkAction": ("executions.bulk", ("executions", "bulk")),
    "countBulkMatches": ("executions.bulk_count", ("executions", "bulk")),
    "getOperation": ("operations.get", ("operations", "get")),
    "abortOperation": ("operations.abort", ("operations", "abort")),
    "createKey": ("keys.create", ("keys", "create")),
    "listKeys": ("keys.list", ("keys", "list")),
    "revokeKey": ("keys.revoke", ("keys", "revoke")),
    "getHealth": ("health", ("health",)),
    "getMetrics": ("metrics", ("metrics",)),
    "getOverview": ("overview", ("overview",)),
    "getOpenApi": ("openapi", ("openapi",)),
}

#: Operations a client program has no use for, and why.
NOT_CLIENT_OPERATIONS = {
    "getDashboard": "the dashboard's HTML page, for a browser",
    "getDashboardFile": "the dashboard page's scripts and styles, for a browser",
    "getLiveness": "a load balancer's probe of one container; `te health` reads the "
    "deployment's state (GET /health)",
}


def operations() -> list[tuple[str, str, str]]:
    """(operationId, METHOD, path) of every operation the document describes."""
    found = []
    for path, item in openapi_document()["paths"].items():
        for method, operation in item.items():
            if method in METHODS:
                found.append((operation["operationId"], method.upper(), path))
    return sorted(found)


def sdk_method(dotted: str) -> Any:
    target: Any = Client("http://127.0.0.1:9", "unused")  # never connects: nothing is called
    for name in dotted.split("."):
        target = getattr(target, name, None)
        if target is None:
            return None
    return target


def cli_command(words: tuple[str, ...]) -> click.Command | None:
    command: click.Command | None = main
    ctx = click.Context(main)
    for word in words:
        if not isinstance(command, click.Group):
            return None
        command = command.get_command(ctx, word)
        if command is None:
            return None
    return command


@pytest.mark.parametrize(("op_id", "method", "path"), operations())
def test_every_operation_has_an_sdk_method_and_a_cli_command(
    op_id: str, method: str, path: str
) -> None:
    if op_id in NOT_CLIENT_OPERATIONS:
        return
    assert op_id in COVERAGE, (
        f"{method} {path} ({op_id}) has no SDK method or te command listed: add both "
        "(te/client.py, te/cli/) and list them in COVERAGE"
    )
    dotted, words = COVERAGE[op_id]
    assert callable(sdk_method(dotted)), f"{op_id}: no SDK method Client.{dotted}"
    command = cli_command(words)
    assert command is not None and not isinstance(command, click.Group), (
        f"{op_id}: no command 'te {' '.join(words)}'"
    )


def test_the_table_names_only_operations_that_exist() -> None:
    """A removed or renamed operation must leave the tables too."""
    known = {op_id for op_id, _, _ in operations()}
    assert set(COVERAGE) - known == set()
    assert set(NOT_CLIENT_OPERATIONS) - known == set()


def test_an_operation_missing_from_the_table_fails_the_walk() -> None:
    """The check itself: an unlisted operation id, a missing SDK method or a missing
    command is caught."""
    assert "frobnicateJob" not in COVERAGE and "frobnicateJob" not in NOT_CLIENT_OPERATIONS
    with pytest.raises(AssertionError, match="frobnicateJob"):
        test_every_operation_has_an_sdk_method_and_a_cli_command(
            "frobnicateJob", "POST", "/jobs/{job_id}/frobnicate"
        )
    assert sdk_method("jobs.frobnicate") is None
    assert cli_command(("jobs", "frobnicate")) is None
    assert cli_command(("jobs",)) is not None
