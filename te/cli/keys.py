"""``te keys``: create and revoke API keys.

The REST API has no key routes (a key is the credential that reaches it), so these
commands work on the database directly, as ``python -m chalicelib.api.keys`` does: they
need ``TE_DATABASE_URL`` (or, in local mode, the embedded database of ``make run``'s data
directory) and run where the service's code is installed, i.e. in the project's venv.
"""

from __future__ import annotations

from typing import Any

import click

from te.cli.output import json_option, show


def _service() -> Any:
    try:
        from chalicelib import services
    except ImportError as exc:  # te installed without the service's code
        raise click.ClickException(
            "te keys needs the service's code (chalicelib): run it from the project's venv"
        ) from exc
    return services.api_key_service()


@click.group()
def keys() -> None:
    """API keys (database access needed: TE_DATABASE_URL)."""


@keys.command("create")
@click.argument("name")
@json_option
def create(name: str) -> None:
    """Create a key; the key itself is printed once and never stored."""
    created = _service().create(name)
    show({"key_id": created.key_id, "name": name, "api_key": created.key})
    click.echo("Store the key now: it is not shown again.", err=True)


@keys.command("revoke")
@click.argument("key_id")
@json_option
def revoke(key_id: str) -> None:
    """Revoke a key (running API processes honour it within TE_API_KEY_CACHE_TTL_SEC)."""
    if not _service().revoke(key_id):
        raise click.ClickException(f"no active key with id {key_id}")
    show({"revoked": key_id})
