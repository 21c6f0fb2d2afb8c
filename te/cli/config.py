"""``te configure``: write the config file (URL and API key), readable by its owner only."""

from __future__ import annotations

import click

from te.client import config_path, write_config


@click.command()
@click.option("--url", "config_url", required=True, help="API base URL to store.")
@click.option(
    "--api-key",
    "config_key",
    prompt="API key",
    hide_input=True,
    help="API key to store (asked for, unechoed, when left out).",
)
def configure(config_url: str, config_key: str) -> None:
    """Write url and api_key to the config file (TE_CONFIG, else ~/.config/te/config.toml),
    mode 0600: the key is a password."""
    path = config_path()
    write_config(path, config_url, config_key)
    click.echo(f"wrote {path} (mode 0600)")
