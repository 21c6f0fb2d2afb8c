"""``te keys``: create, list and revoke API keys over the API (an ``admin`` key is needed).

Like every other command it needs only ``TE_URL`` and ``TE_API_KEY``. The first key of a
fresh database, where no key can call the API yet, is the operator's: ``python -m
chalicelib.migrate --first-admin-key NAME`` (database access needed), or the
``TE_BOOTSTRAP_API_KEY`` the service is started with (``make run`` prints one).
"""

from __future__ import annotations

import click

from te.cli.output import json_option, settings, show

KEY_COLUMNS = ("key_id", "name", "scope", "created_at", "revoked_at")
SCOPES = ("read", "write", "admin")


@click.group()
def keys() -> None:
    """API keys: create, list, revoke (an admin key is needed)."""


@keys.command("create")
@click.argument("name")
@click.option(
    "--scope",
    type=click.Choice(SCOPES),
    required=True,
    help="read: every GET; write: everything but keys; admin: everything.",
)
@json_option
def create(name: str, scope: str) -> None:
    """Create a key; the key itself is printed once and never stored."""
    show(settings().client().keys.create(name, scope))
    click.echo("Store the key now: it is not shown again.", err=True)


@keys.command("list")
@json_option
def list_() -> None:
    """Every key, revoked ones included (never a key itself)."""
    show(list(settings().client().keys.list_all()), KEY_COLUMNS)


@keys.command("revoke")
@click.argument("key_id")
@json_option
def revoke(key_id: str) -> None:
    """Revoke a key (running API processes honour it within TE_API_KEY_CACHE_TTL_SEC)."""
    show(settings().client().keys.revoke(key_id))
