"""``te endpoints|configs|secrets|payload-specs|topics``: the named catalogue resources.

Each has ``create -f FILE`` (the request body, JSON or YAML; ``-`` reads stdin), ``list``,
``get NAME``, ``update NAME -f FILE`` and ``delete NAME``; ``te endpoints`` also has
``pause NAME``, ``resume NAME``, ``redrive NAME --since --until [--error-type]
[--endpoint-version]``, ``blocked-keys NAME`` (its ordering keys waiting on a failed head)
and ``skip-key NAME KEY``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from te.cli.output import json_option, read_object, settings, show

FILE = click.option(
    "-f",
    "--file",
    "path",
    type=click.Path(path_type=Path, allow_dash=True),
    required=True,
    help="The request body: a JSON or YAML file ('-': stdin).",
)


def named_group(name: str, attr: str, columns: tuple[str, ...], what: str) -> click.Group:
    """The five commands of one named collection (``attr``: the SDK's attribute)."""

    @click.group(name=name, help=f"{what} (create, list, get, update, delete).")
    def group() -> None:
        pass

    def collection() -> Any:
        return getattr(settings().client(), attr)

    @group.command("create")
    @FILE
    @json_option
    def create(path: Path) -> None:
        """Create from a JSON/YAML file holding the request body."""
        show(collection().create(read_object(path)))

    @group.command("list")
    @json_option
    def list_() -> None:
        """Every item (all pages)."""
        show(list(collection().list_all()), columns)

    @group.command("get")
    @click.argument("name")
    @json_option
    def get(name: str) -> None:
        """One item by name."""
        show(collection().get(name))

    @group.command("update")
    @click.argument("name")
    @FILE
    @json_option
    def update(name: str, path: Path) -> None:
        """Replace from a JSON/YAML file."""
        show(collection().replace(name, read_object(path)))

    @group.command("delete")
    @click.argument("name")
    @json_option
    def delete(name: str) -> None:
        """Delete by name (409 while something still uses it)."""
        collection().delete(name)
        show({"deleted": name})

    return group


ENDPOINTS = named_group(
    "endpoints",
    "endpoints",
    ("name", "type", "spec", "retry_policy", "paused_at", "paused_reason", "updated_at"),
    "Delivery targets (HTTP, Kafka, Redis Stream)",
)
ENDPOINTS.help = (
    "Delivery targets (HTTP, Kafka, Redis Stream): create, list, get, update, delete, "
    "pause, resume, redrive, blocked-keys, skip-key."
)


@ENDPOINTS.command("pause")
@click.argument("name")
@json_option
def pause(name: str) -> None:
    """Stop delivering to an endpoint (its executions wait; nothing is lost). Its
    paused_reason is OPERATOR (GONE or FAILING when it paused itself)."""
    show(settings().client().endpoints.pause(name))


@ENDPOINTS.command("resume")
@click.argument("name")
@json_option
def resume(name: str) -> None:
    """Deliver to a paused endpoint again, whatever paused it (paused_reason clears)."""
    show(settings().client().endpoints.resume(name))


@ENDPOINTS.command("redrive")
@click.argument("name")
@click.option("--since", required=True, help="ISO 8601 instant with an offset (inclusive).")
@click.option("--until", required=True, help="ISO 8601 instant with an offset (exclusive).")
@click.option("--error-type", help="Only executions whose last error is of this type.")
@click.option("--all", "until_done", is_flag=True, help="Call again while more remain.")
@click.option(
    "--endpoint-version",
    type=click.Choice(["snapshot", "current"]),
    help="Deliver with each job's endpoint snapshot (default) or the endpoint as it is now.",
)
@json_option
def redrive(
    name: str,
    since: str,
    until: str,
    error_type: str | None,
    until_done: bool,
    endpoint_version: str | None,
) -> None:
    """Requeue the endpoint's FAILED executions created in [--since, --until).

    One request requeues at most 5,000 (the answer says whether ``more`` remain); --all
    repeats it until none remain and prints the total.
    """
    api = settings().client().endpoints
    requeued = 0
    while True:
        answer = api.redrive(
            name,
            since=since,
            until=until,
            error_type=error_type,
            endpoint_version=endpoint_version,
        )
        requeued += answer["requeued"]
        if not (until_done and answer["more"]):
            break
    show({"requeued": requeued, "more": answer["more"]})


@ENDPOINTS.command("blocked-keys")
@click.argument("name")
@json_option
def blocked_keys(name: str) -> None:
    """List the endpoint's blocked ordering keys: each waits on its failed head until that
    execution is retried (te executions retry ID) or the key is skipped."""
    api = settings().client().endpoints
    show(list(api.blocked_keys_all(name)), ("key", "execution_id", "since"))


@ENDPOINTS.command("skip-key")
@click.argument("name")
@click.argument("key")
@json_option
def skip_key(name: str, key: str) -> None:
    """Unblock a blocked ordering key: its failed execution stays FAILED and the key's next
    execution starts."""
    show(settings().client().endpoints.skip_key(name, key))


GROUPS = (
    ENDPOINTS,
    named_group("configs", "configs", ("name", "values", "updated_at"), "Configs"),
    named_group(
        "secrets", "secrets", ("name", "created_at", "updated_at"), "Secrets (values never shown)"
    ),
    named_group(
        "payload-specs", "payload_specs", ("name", "schema", "updated_at"), "Payload specs"
    ),
    named_group(
        "topics",
        "topics",
        ("name", "endpoints", "updated_at"),
        "Fan-out topics: 'te jobs create' with a \"topic\" body creates a job per endpoint",
    ),
)
