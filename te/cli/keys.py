"""``te keys``: create and revoke API keys.

The REST API has no key routes (a key is the credential that reaches it), so these
commands work on the database directly, as ``python -m chalicelib.api.keys`` does: they
need ``TE_DATABASE_URL`` (or, in local mode, the embedded database of ``make run``'s data
directory) and run where the service's code is installed, i.e. in the project's venv. A
missing setting or an unreachable database is one line on stderr and exit status 1, like
the other commands' configuration and connection errors.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from te.cli.output import json_option, show


@contextmanager
def _key_service() -> Iterator[Any]:
    """The key service; its configuration and database errors end the command cleanly."""
    try:
        from chalicelib import services
        from chalicelib.errors import TaskExecutorError
    except ImportError as exc:  # te installed without the service's code
        raise click.ClickException(
            "te keys needs the service's code (chalicelib): run it from the project's venv"
        ) from exc
    try:
        yield services.api_key_service()
    except TaskExecutorError as exc:
        click.echo(f"Error: {' '.join(exc.message.split())}", err=True)
        raise click.exceptions.Exit(1) from None


@click.group()
def keys() -> None:
    """API keys (database access needed: TE_DATABASE_URL)."""


@keys.command("create")
@click.argument("name")
@json_option
def create(name: str) -> None:
    """Create a key; the key itself is printed once and never stored."""
    with _key_service() as service:
        created = service.create(name)
    show({"key_id": created.key_id, "name": name, "api_key": created.key})
    click.echo("Store the key now: it is not shown again.", err=True)


@keys.command("revoke")
@click.argument("key_id")
@json_option
def revoke(key_id: str) -> None:
    """Revoke a key (running API processes honour it within TE_API_KEY_CACHE_TTL_SEC)."""
    with _key_service() as service:
        revoked = service.revoke(key_id)
    if not revoked:
        raise click.ClickException(f"no active key with id {key_id}")
    show({"revoked": key_id})
