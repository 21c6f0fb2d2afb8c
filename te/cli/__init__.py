"""``te``: Task Executor from the command line, over the REST API (:mod:`te.client`).

Configuration: ``TE_URL`` and ``TE_API_KEY`` (or ``--url``/``--api-key``), else ``url``
and ``api_key`` in ``~/.config/te/config.toml`` (another file: ``TE_CONFIG``; ``te
configure`` writes it, mode 0600, and a key in a file others may read is used with a
warning on stderr). Output: tables for people, ``--json`` for scripts. Any error exits
with status 1 and the API's code and message on stderr.
"""

from __future__ import annotations

from typing import Any

import click

from te.cli.output import Options, fail, json_option
from te.client import TeError


class TeGroup(click.Group):
    """A group whose commands' SDK errors become one stderr line and exit status 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TeError as exc:
            fail(exc)


@click.group(cls=TeGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--url", envvar="TE_URL", help="API base URL (TE_URL).")
@click.option("--api-key", envvar="TE_API_KEY", help="API key (TE_API_KEY).")
@json_option
@click.pass_context
def main(ctx: click.Context, url: str | None, api_key: str | None) -> None:
    """Task Executor: setTimeout and setInterval as a service."""
    options = ctx.ensure_object(Options)
    options.url, options.api_key = url, api_key


def _register() -> None:
    from te.cli import catalogue, config, executions, jobs, keys, operations

    executions.executions.add_command(operations.bulk)
    groups: tuple[click.Group, ...] = (
        *catalogue.GROUPS,
        jobs.jobs,
        jobs.batch,
        executions.executions,
        keys.keys,
    )
    groups = (*groups, operations.operations)
    reads = (executions.health, executions.overview, executions.metrics, executions.openapi)
    commands: tuple[click.Command, ...] = (*groups, executions.dead_letters, executions.watch)
    for command in (*commands, *reads, config.configure):
        main.add_command(command)


_register()
