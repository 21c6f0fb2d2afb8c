"""``te executions`` (get, attempts, logs, cancel, retry), ``te watch`` and ``te health``."""

from __future__ import annotations

import json
import time
from typing import Any

import click

from te.cli.output import json_option, settings, show
from te.client import TERMINAL

ATTEMPT_COLUMNS = ("attempt_number", "status", "started_at", "duration_ms", "error")
LOG_COLUMNS = ("logged_at", "attempt_number", "level", "message")
#: ``te watch`` exits with this when the execution ended FAILED or CANCELLED.
NOT_SUCCEEDED = 3


@click.group()
def executions() -> None:
    """Executions: get, attempts, logs, cancel, retry."""


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
@json_option
def retry(execution_id: str) -> None:
    """Queue a FAILED execution again with a new attempt budget (409 unless FAILED)."""
    show(settings().client().executions.retry(execution_id))


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
    """GET /health: the API is up and its database answers (exit 1 otherwise)."""
    show(settings().client().health())
