"""``te endpoints|configs|secrets|payload-specs``: the named setup resources.

Each has ``create -f FILE`` (the request body, JSON or YAML; ``-`` reads stdin), ``list``,
``get NAME``, ``update NAME -f FILE`` and ``delete NAME``.
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
        """Delete by name (409 while live jobs use it)."""
        collection().delete(name)
        show({"deleted": name})

    return group


GROUPS = (
    named_group(
        "endpoints",
        "endpoints",
        ("name", "type", "spec", "retry_policy", "paused_at", "updated_at"),
        "Delivery targets (HTTP, Kafka, Redis Stream)",
    ),
    named_group("configs", "configs", ("name", "values", "updated_at"), "Configs"),
    named_group(
        "secrets", "secrets", ("name", "created_at", "updated_at"), "Secrets (values never shown)"
    ),
    named_group(
        "payload-specs", "payload_specs", ("name", "schema", "updated_at"), "Payload specs"
    ),
)
