"""``te executions bulk retry|cancel|delete`` (a bulk action over a filter), ``te executions
bulk count`` (how many it matches, changing nothing) and
``te operations get|abort`` (its progress); ``--wait`` follows an operation to its end."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from te.cli.output import json_option, settings, show
from te.client import Client

EXECUTION_STATUSES = ("PENDING", "QUEUED", "RUNNING", "RETRYING", "SUCCESS", "FAILED", "CANCELLED")
#: Exit status of ``--wait`` when the operation ended ABORTED or FAILED.
NOT_DONE = 3


def _wait_options(command: Callable[..., Any]) -> Callable[..., Any]:
    command = click.option(
        "--interval",
        type=click.FloatRange(0.1, 60),
        default=1.0,
        show_default=True,
        help="Seconds between looks while waiting.",
    )(command)
    return click.option(
        "--wait", is_flag=True, help="Follow it to its end, printing progress (stderr)."
    )(command)


@click.command()
@click.argument("action", type=click.Choice(["retry", "cancel", "delete", "count"]))
@click.option("--endpoint", help="Only this endpoint's executions.")
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice(EXECUTION_STATUSES),
    help="Only executions in this status (repeat for several).",
)
@click.option("--error-type", help="Only those whose last error is of this type.")
@click.option("--created-after", help="Created at or after this ISO 8601 instant.")
@click.option("--created-before", help="Created before this ISO 8601 instant.")
@click.option("--all", "every", is_flag=True, help="Every execution (no filter).")
@_wait_options
@json_option
def bulk(
    action: str, statuses: tuple[str, ...], every: bool, wait: bool, interval: float, **filters: Any
) -> None:
    """Retry, cancel or delete every execution a filter matches, in the background; or
    count them first (``count``: changes nothing; up to 1000, "more" past it).

    retry acts on FAILED executions, cancel on PENDING, QUEUED and RETRYING ones, delete on
    ended ones (with their attempts and logs); the others are refused and counted.
    Executions created after the action are not touched. Purge an endpoint's pending work
    with ``te executions bulk cancel --endpoint E --status PENDING --status QUEUED
    --status RETRYING``. With --wait, progress goes to stderr and the exit status is 3
    unless the operation ends DONE.
    """
    given = {k: v for k, v in filters.items() if v is not None}
    if statuses:
        given["status"] = list(statuses)
    client = settings().client()
    if action == "count":
        if wait:
            raise click.UsageError("--wait follows an operation: count creates none.")
        show(client.executions.bulk_count(all=every, **given))
        return
    _finish(client, client.executions.bulk(action, all=every, **given), wait, interval)


def _finish(client: Client, operation: Any, wait: bool, interval: float) -> None:
    """Show the operation; with ``wait``, its progress until it ends (exit 3 unless DONE)."""
    if wait and operation["state"] == "RUNNING":
        operation = client.operations.wait(
            operation["operation_id"], interval=interval, progress=_progress
        )
    show(operation)
    if wait and operation["state"] != "DONE":
        raise click.exceptions.Exit(NOT_DONE)


def _progress(operation: Any) -> None:
    click.echo(
        f"{operation['operation_id']} {operation['state']}: matched {operation['matched']}, "
        f"done {operation['done']}, refused {operation['refused']}",
        err=True,
    )


@click.group()
def operations() -> None:
    """Bulk operations: their progress, abort."""


@operations.command("get")
@click.argument("operation_id")
@_wait_options
@json_option
def get(operation_id: str, wait: bool, interval: float) -> None:
    """An operation's state and counts (matched = done + refused)."""
    client = settings().client()
    _finish(client, client.operations.get(operation_id), wait, interval)


@operations.command("abort")
@click.argument("operation_id")
@json_option
def abort(operation_id: str) -> None:
    """Stop a RUNNING operation (409 once DONE or FAILED)."""
    show(settings().client().operations.abort(operation_id))
