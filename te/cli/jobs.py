"""``te jobs`` (create, list, get, cancel, versions, status, executions) and ``te batch``
(create jobs from a JSON-lines file, in requests of up to 1,000, with a progress bar)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from te.cli.output import json_option, read_object, settings, show
from te.cli.setup import FILE
from te.client import MAX_BATCH

JOB_COLUMNS = ("job_id", "endpoint", "trigger", "status", "version", "created_at")
EXECUTION_COLUMNS = ("execution_id", "status", "attempt_count", "run_at", "completed_at")


@click.group()
def jobs() -> None:
    """Jobs: create, list, get, cancel, versions, status, executions."""


@jobs.command("create")
@FILE
@json_option
def create(path: Path) -> None:
    """Create a job from a JSON/YAML file (the POST /jobs body)."""
    show(settings().client().jobs.create(read_object(path)))


@jobs.command("list")
@click.option("--endpoint", help="Only this endpoint's jobs.")
@click.option("--trigger", type=click.Choice(["IMMEDIATE", "DELAYED", "CRON"]))
@click.option("--status", type=click.Choice(["ACTIVE", "RETIRED"]))
@click.option("--limit", type=click.IntRange(1, 200), help="One page of this size.")
@json_option
def list_(endpoint: str | None, trigger: str | None, status: str | None, limit: int | None) -> None:
    """Jobs, newest first (every page unless --limit)."""
    filters = {"endpoint": endpoint, "trigger": trigger, "status": status}
    api = settings().client().jobs
    items = api.list(limit=limit, **filters)["items"] if limit else list(api.list_all(**filters))
    show(items, JOB_COLUMNS)


@jobs.command("get")
@click.argument("job_id")
@json_option
def get(job_id: str) -> None:
    """One job with its latest execution."""
    show(settings().client().jobs.get(job_id))


@jobs.command("cancel")
@click.argument("job_id")
@json_option
def cancel(job_id: str) -> None:
    """Retire a cron job, or cancel a one-shot job's pending execution."""
    show(settings().client().jobs.cancel(job_id))


@jobs.command("versions")
@click.argument("job_id")
@json_option
def versions(job_id: str) -> None:
    """Every version of a job's chain, oldest first."""
    show(list(settings().client().jobs.versions(job_id)), JOB_COLUMNS)


@jobs.command("status")
@click.argument("job_id")
@json_option
def status(job_id: str) -> None:
    """Health, last execution, in-flight counts and 24-hour stats."""
    show(settings().client().jobs.status(job_id))


@jobs.command("executions")
@click.argument("job_id")
@click.option("--status", help="Only executions in this status.")
@json_option
def executions(job_id: str, status: str | None) -> None:
    """A job's executions, newest first."""
    show(list(settings().client().jobs.executions(job_id, status=status)), EXECUTION_COLUMNS)


@click.group()
def batch() -> None:
    """Batches of jobs: create from a JSON-lines file, get progress."""


def _lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, job request) for each non-blank line of a JSON-lines file."""
    requests: list[tuple[int, dict[str, Any]]] = []
    with click.open_file(str(path), encoding="utf-8") as stream:
        for number, line in enumerate(stream, start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except ValueError as exc:
                raise click.BadParameter(f"line {number}: not JSON ({exc})") from exc
            if not isinstance(item, dict):
                raise click.BadParameter(f"line {number}: a job request must be an object")
            requests.append((number, item))
    if not requests:
        raise click.BadParameter(f"{path} holds no job requests")
    return requests


def _chunks(
    items: list[tuple[int, dict[str, Any]]], size: int
) -> Iterator[list[tuple[int, dict[str, Any]]]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


@batch.command("create")
@click.argument("path", type=click.Path(path_type=Path, allow_dash=True))
@click.option(
    "--chunk",
    type=click.IntRange(1, MAX_BATCH),
    default=MAX_BATCH,
    show_default=True,
    help="Job requests per POST /jobs/batch.",
)
@click.option(
    "--atomic", is_flag=True, help="Each request all-or-nothing (422 if any item is invalid)."
)
@click.option("--on-complete", help="Endpoint called when each request's batch completes.")
@json_option
def create_batch(path: Path, chunk: int, atomic: bool, on_complete: str | None) -> None:
    """Create jobs from a JSON-lines file (one POST /jobs body per line).

    Sent in requests of up to 1,000 (one batch each) with a progress bar; exits 1 when any
    job was refused, listing the refused lines (by line number in the file).
    """
    requests = _lines(path)
    options: dict[str, Any] = {"atomic": True} if atomic else {}
    if on_complete:
        options["on_complete"] = on_complete
    api = settings().client().jobs
    results: list[dict[str, Any]] = []
    with click.progressbar(length=len(requests), label="Creating jobs", file=sys.stderr) as bar:
        for part in _chunks(requests, chunk):
            answer = api.create_batch([request for _, request in part], **options)
            results += [
                {"line": number, "batch_id": answer["batch_id"], **item}
                for (number, _), item in zip(part, answer["items"], strict=True)
            ]
            bar.update(len(part))
    _report(results)


def _report(results: list[dict[str, Any]]) -> None:
    refused = [
        {"line": r["line"], "status": r["status"], **(r.get("error") or {})}
        for r in results
        if r["status"] >= 400
    ]
    summary: dict[str, Any] = {
        # In the file's order (one batch per chunk), so batches[i] is the i-th chunk's.
        "batches": list(dict.fromkeys(r["batch_id"] for r in results if r.get("batch_id"))),
        "created": sum(1 for r in results if r["status"] == 201),
        "existing": sum(1 for r in results if r["status"] == 200),
        "refused": refused,
    }
    if settings().json:
        show(summary)
    else:
        click.echo(
            f"{summary['created']} created, {summary['existing']} already existed, "
            f"{len(refused)} refused; batches: {', '.join(summary['batches']) or '-'}"
        )
        if refused:
            show(refused, ("line", "status", "code", "message"))
    if refused:
        raise click.exceptions.Exit(1)


@batch.command("get")
@click.argument("batch_id")
@json_option
def get_batch(batch_id: str) -> None:
    """A batch's progress: counts by status, RUNNING or COMPLETED."""
    show(settings().client().batches.get(batch_id))
