"""``te executions`` (list, get, attempts, logs, cancel, retry), ``te dead-letters`` (the
FAILED executions), ``te watch``, and the service-wide reads ``te health``, ``te overview``,
``te metrics`` and ``te openapi``."""

from __future__ import annotations

import json
import time
from typing import Any

import click

from te.cli.output import json_option, settings, show
from te.client import TERMINAL

ATTEMPT_COLUMNS = ("attempt_number", "status", "started_at", "duration_ms", "error")
LOG_COLUMNS = ("logged_at", "attempt_number", "level", "message")
LISTED_COLUMNS = ("execution_id", "job_id", "status", "attempt_count", "error_type", "created_at")
EXECUTION_STATUSES = ("PENDING", "QUEUED", "RUNNING", "RETRYING", "SUCCESS", "FAILED", "CANCELLED")
#: ``te watch`` exits with this when the execution ended FAILED or CANCELLED.
NOT_SUCCEEDED = 3


#: Retry and redrive: which definition of the endpoint the requeued executions use.
ENDPOINT_VERSION = click.option(
    "--endpoint-version",
    type=click.Choice(["snapshot", "current"]),
    help="Deliver with the job's endpoint snapshot (default) or the endpoint as it is now.",
)


@click.group()
def executions() -> None:
    """Executions: list, get, attempts, logs, cancel, retry."""


def _filters(command: Any) -> Any:
    """The listing's filters (``--status`` aside) and ``--limit``."""
    for option in (
        click.option("--limit", type=click.IntRange(1, 200), help="One page of this size."),
        click.option("--error-type", help="Only those whose last error is of this type."),
        click.option("--until", help="Created before this ISO 8601 instant (with offset)."),
        click.option("--since", help="Created at or after this ISO 8601 instant."),
        click.option("--endpoint", help="Only this endpoint's executions."),
    ):
        command = option(command)
    return command


def _listing(limit: int | None, **filters: Any) -> None:
    api = settings().client().executions
    items = api.list(limit=limit, **filters)["items"] if limit else list(api.list_all(**filters))
    show(items, LISTED_COLUMNS)


@executions.command("list")
@click.option("--status", type=click.Choice(EXECUTION_STATUSES))
@_filters
@json_option
def list_(status: str | None, limit: int | None, **filters: Any) -> None:
    """Executions across jobs, newest first (every page unless --limit)."""
    _listing(limit, status=status, **filters)


@click.command("dead-letters")
@_filters
@json_option
def dead_letters(limit: int | None, **filters: Any) -> None:
    """The dead letters: FAILED executions with their last error, newest first.

    Requeue one with ``te executions retry ID``, many with ``te endpoints redrive``.
    """
    _listing(limit, status="FAILED", **filters)


@executions.command("get")
@click.argument("execution_id")
@json_option
def get(execution_id: str) -> None:
    """One execution (status, input, output, attempts, queue position)."""
    show(settings().client().executions.get(execution_id))


@executions.command("attempts")
@click.argument("execution_id")
@json_option
def attempts(execution_id: str) -> None:
    """Its delivery attempts, in order."""
    show(list(settings().client().executions.attempts(execution_id)), ATTEMPT_COLUMNS)


@executions.command("logs")
@click.argument("execution_id")
@json_option
def logs(execution_id: str) -> None:
    """Its log lines, oldest first."""
    show(list(settings().client().executions.logs(execution_id)), LOG_COLUMNS)


@executions.command("cancel")
@click.argument("execution_id")
@json_option
def cancel(execution_id: str) -> None:
    """Cancel if PENDING, QUEUED or RETRYING (409 otherwise)."""
    show(settings().client().executions.cancel(execution_id))


@executions.command("retry")
@click.argument("execution_id")
@ENDPOINT_VERSION
@json_option
def retry(execution_id: str, endpoint_version: str | None) -> None:
    """Queue a FAILED execution again with a new attempt budget (409 unless FAILED)."""
    api = settings().client().executions
    show(api.retry(execution_id, endpoint_version=endpoint_version))


@click.command()
@click.argument("execution_id")
@click.option(
    "--interval",
    type=click.IntRange(1, 25),
    default=2,
    show_default=True,
    help="Seconds between looks (the server answers at once when it ends).",
)
@click.option("--timeout", type=float, help="Give up after this many seconds (exit 1).")
@json_option
def watch(execution_id: str, interval: int, timeout: float | None) -> None:
    """Follow an execution live until it ends: status changes, attempts, log lines.

    Exits 0 when it ends SUCCESS, 3 when FAILED or CANCELLED, 1 on an error or --timeout.
    With --json each event is one JSON object per line.
    """
    api = settings().client().executions
    deadline = None if timeout is None else time.monotonic() + timeout
    seen: set[str] = set()
    last_status = None
    while True:
        execution = api.get(execution_id, wait=interval)
        if execution["status"] != last_status:
            last_status = execution["status"]
            _event("status", execution, ("status", "attempt_count", "run_at"))
        for attempt in api.attempts(execution_id):
            if attempt["attempt_id"] not in seen:
                seen.add(attempt["attempt_id"])
                _event("attempt", attempt, ("attempt_number", "status", "duration_ms", "error"))
        for line in api.logs(execution_id):
            if line["log_id"] not in seen:
                seen.add(line["log_id"])
                _event("log", line, ("level", "message"))
        if execution["status"] in TERMINAL:
            _event("done", execution, ("status", "output"))
            if execution["status"] != "SUCCESS":
                raise click.exceptions.Exit(NOT_SUCCEEDED)
            return
        if deadline is not None and time.monotonic() >= deadline:
            click.echo(f"Error: still {execution['status']} after {timeout} s", err=True)
            raise click.exceptions.Exit(1)


def _event(kind: str, data: dict[str, Any], fields: tuple[str, ...]) -> None:
    if settings().json:
        click.echo(json.dumps({"event": kind, **data}, sort_keys=True))
        return
    parts = [
        f"{f}={json.dumps(data.get(f)) if not isinstance(data.get(f), str) else data[f]}"
        for f in fields
    ]
    stamp = time.strftime("%H:%M:%S")
    click.echo(f"{stamp} {kind:<7} " + " ".join(parts))


@click.command()
@json_option
def health() -> None:
    """GET /health: the deployment's state: the database answers, no kind of process
    (worker, scheduler) is missing and no loop is down (exit 1 otherwise)."""
    show(settings().client().health())


@click.command()
@json_option
def overview() -> None:
    """GET /overview: counts by status, throughput, lag, workers, endpoint outcomes."""
    show(settings().client().overview())


@click.command()
def metrics() -> None:
    """GET /metrics: the Prometheus exposition text."""
    click.echo(settings().client().metrics(), nl=False)


@click.command()
def openapi() -> None:
    """GET /openapi.json: the OpenAPI 3.1 document (JSON)."""
    click.echo(json.dumps(settings().client().openapi(), indent=2, sort_keys=True))
