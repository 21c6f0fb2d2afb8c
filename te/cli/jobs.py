"""``te jobs`` (create, list, find, get, update, reschedule, cancel, pause, resume, trigger,
versions, status, executions) and ``te batch`` (create jobs from a JSON-lines file, in
requests of up to 1,000 job requests and 1 MiB, with a progress bar; get, jobs, cancel)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from te.cli.catalogue import FILE
from te.cli.output import fail, json_option, read_object, settings, show
from te.client import MAX_BATCH, MAX_BODY_BYTES, Jobs, TeError, encode_body

JOB_COLUMNS = ("job_id", "endpoint", "trigger", "status", "version", "created_at")
EXECUTION_COLUMNS = ("execution_id", "status", "attempt_count", "run_at", "completed_at")


@click.group()
def jobs() -> None:
    """Jobs: create, list, find, get, update, reschedule, cancel, pause, resume, trigger,
    versions, status, executions."""


TRACEPARENT = click.option(
    "--traceparent", help="W3C traceparent the jobs keep: each delivery attempt continues it."
)
TRACESTATE = click.option("--tracestate", help="W3C tracestate sent with the traceparent.")


@jobs.command("create")
@FILE
@TRACEPARENT
@TRACESTATE
@json_option
def create(path: Path, traceparent: str | None, tracestate: str | None) -> None:
    """Create a job from a JSON/YAML file (the POST /jobs body: "headers" and any JSON
    "input" included)."""
    api = settings().client().jobs
    show(api.create(read_object(path), traceparent=traceparent, tracestate=tracestate))


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


@jobs.command("find")
@click.argument("endpoint")
@click.argument("idempotency_key")
@json_option
def find(endpoint: str, idempotency_key: str) -> None:
    """The job created on ENDPOINT with IDEMPOTENCY_KEY (exit 1 if there is none)."""
    job = settings().client().jobs.find(endpoint, idempotency_key)
    if job is None:
        raise click.ClickException(
            f"no job on endpoint {endpoint!r} with idempotency key {idempotency_key!r}"
        )
    show(job)


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


@jobs.command("update")
@click.argument("job_id")
@FILE
@json_option
def update(job_id: str, path: Path) -> None:
    """Replace a cron job from a JSON/YAML file (the PUT /jobs/{id} body): a new version."""
    show(settings().client().jobs.update(job_id, read_object(path)))


@jobs.command("reschedule")
@click.argument("job_id")
@click.option("--run-at", help="The new time, ISO 8601 with an offset.")
@click.option("--delay", help="The new time as a delay from now: 250ms, 90s, 15m, 1h30m, 2d.")
@json_option
def reschedule(job_id: str, run_at: str | None, delay: str | None) -> None:
    """Move a DELAYED job not yet started to a new time (exactly one of --run-at, --delay)."""
    if (run_at is None) == (delay is None):
        raise click.UsageError("give exactly one of --run-at and --delay")
    show(settings().client().jobs.reschedule(job_id, run_at=run_at, delay=delay))


@jobs.command("pause")
@click.argument("job_id")
@json_option
def pause(job_id: str) -> None:
    """Pause an ACTIVE cron job: no ticks until it is resumed."""
    show(settings().client().jobs.pause(job_id))


@jobs.command("resume")
@click.argument("job_id")
@click.option("--catch-up", is_flag=True, help="Fire the ticks missed while paused.")
@json_option
def resume(job_id: str, catch_up: bool) -> None:
    """Resume a paused cron job (missed ticks are skipped unless --catch-up)."""
    show(settings().client().jobs.resume(job_id, catch_up=catch_up))


@jobs.command("trigger")
@click.argument("job_id")
@json_option
def trigger(job_id: str) -> None:
    """Run an ACTIVE cron job now, outside its schedule (prints the new execution)."""
    show(settings().client().jobs.trigger(job_id))


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
    """Batches of jobs: create from a JSON-lines file, get progress, list jobs, cancel."""


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


Line = tuple[int, dict[str, Any]]


def _chunks(
    items: list[Line], size: int, max_bytes: int, options: dict[str, Any]
) -> list[list[Line]]:
    """The lines in requests of at most ``size`` job requests whose ``POST /jobs/batch`` body
    (as the client encodes it) is at most ``max_bytes``. A line too large to be sent even
    alone is a usage error naming it, raised before anything is sent."""
    base = len(encode_body({"jobs": [], **options}))  # each item adds its size, + 2 after one
    parts: list[list[Line]] = []
    part: list[Line] = []
    used = base
    for number, request in items:
        cost = len(encode_body(request))
        if base + cost > max_bytes:
            raise click.BadParameter(
                f"line {number}: this job request is {cost} bytes, too large for one "
                f"POST /jobs/batch body of at most {max_bytes} bytes"
            )
        if part and (len(part) == size or used + 2 + cost > max_bytes):
            parts.append(part)
            part, used = [], base
        used += cost + (2 if part else 0)
        part.append((number, request))
    if part:
        parts.append(part)
    return parts


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
    "--max-bytes",
    type=click.IntRange(1024),
    default=MAX_BODY_BYTES,
    show_default=True,
    help="Largest POST /jobs/batch body sent (the API's TE_MAX_BODY_BYTES).",
)
@click.option(
    "--atomic", is_flag=True, help="Each request all-or-nothing (422 if any item is invalid)."
)
@click.option("--on-complete", help="Endpoint called when each request's batch completes.")
@TRACEPARENT
@TRACESTATE
@json_option
def create_batch(
    path: Path,
    chunk: int,
    max_bytes: int,
    atomic: bool,
    on_complete: str | None,
    traceparent: str | None,
    tracestate: str | None,
) -> None:
    """Create jobs from a JSON-lines file (one POST /jobs body per line).

    Sent in requests of up to 1,000 job requests and --max-bytes each (one batch each) with
    a progress bar; exits 1 when any job was refused, listing the refused lines (by line
    number in the file). When a request fails, what the requests before it created is
    reported, then the error (exit status 1).
    """
    options: dict[str, Any] = {"atomic": True} if atomic else {}
    if on_complete:
        options["on_complete"] = on_complete
    requests = _lines(path)
    parts = _chunks(requests, chunk, max_bytes, options)
    trace = {"traceparent": traceparent, "tracestate": tracestate}
    results, failure = _send(settings().client().jobs, parts, options, trace)
    refused = _report(results, failure)
    if failure:
        click.echo(
            f"Stopped at line {failure.line}: its request failed; the {failure.unsent} job "
            "request(s) from that line on were not created (or not confirmed):",
            err=True,
        )
        fail(failure.error)
    if refused:
        raise click.exceptions.Exit(1)


@dataclass
class _Failure:
    line: int  # the first line of the request that failed
    unsent: int  # job requests in it and after it
    error: TeError


def _send(
    api: Jobs,
    parts: list[list[Line]],
    options: dict[str, Any],
    trace: dict[str, str | None] | None = None,
) -> tuple[list[dict[str, Any]], _Failure | None]:
    """Send each part; the answered items (with their line and batch), and the failure
    that stopped the sending, if one did."""
    results: list[dict[str, Any]] = []
    total = sum(len(part) for part in parts)
    with click.progressbar(length=total, label="Creating jobs", file=sys.stderr) as bar:
        for index, part in enumerate(parts):
            try:
                answer = api.create_batch(
                    [request for _, request in part], **(trace or {}), **options
                )
            except TeError as exc:
                unsent = sum(len(rest) for rest in parts[index:])
                return results, _Failure(part[0][0], unsent, exc)
            results += [
                {"line": number, "batch_id": answer["batch_id"], **item}
                for (number, _), item in zip(part, answer["items"], strict=True)
            ]
            bar.update(len(part))
    return results, None


def _report(results: list[dict[str, Any]], failure: _Failure | None) -> bool:
    """Print what the answered requests did; True when any job was refused."""
    summary = _summary(results, failure)
    if settings().json:
        show(summary)
    else:
        click.echo(
            f"{summary['created']} created, {summary['existing']} already existed, "
            f"{len(summary['refused'])} refused; batches: {', '.join(summary['batches']) or '-'}"
        )
        if summary["refused"]:
            show(summary["refused"], ("line", "status", "code", "message"))
    return bool(summary["refused"])


def _summary(results: list[dict[str, Any]], failure: _Failure | None) -> dict[str, Any]:
    """The counts by outcome, the refused lines with their errors, the batches made, and the
    line a failed request stopped at."""
    summary: dict[str, Any] = {
        # In the file's order (one batch per chunk), so batches[i] is the i-th chunk's.
        "batches": list(dict.fromkeys(r["batch_id"] for r in results if r.get("batch_id"))),
        "created": sum(1 for r in results if r["status"] == 201),
        "existing": sum(1 for r in results if r["status"] == 200),
        "refused": _refused(results),
    }
    if failure:
        summary["stopped_at_line"] = failure.line
    return summary


def _refused(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each refused line with its status and error."""
    return [
        {"line": r["line"], "status": r["status"], **(r.get("error") or {})}
        for r in results
        if r["status"] >= 400
    ]


@batch.command("get")
@click.argument("batch_id")
@json_option
def get_batch(batch_id: str) -> None:
    """A batch's progress: counts by status, RUNNING or COMPLETED."""
    show(settings().client().batches.get(batch_id))


@batch.command("jobs")
@click.argument("batch_id")
@click.option("--status", help="Only jobs whose execution is in this status.")
@json_option
def batch_jobs(batch_id: str, status: str | None) -> None:
    """A batch's jobs, newest first."""
    show(list(settings().client().batches.jobs(batch_id, status=status)), JOB_COLUMNS)


@batch.command("cancel")
@click.argument("batch_id")
@json_option
def cancel_batch(batch_id: str) -> None:
    """Cancel every cancellable job of a batch; says how many."""
    show(settings().client().batches.cancel(batch_id))
