"""How the CLI prints: aligned tables for people, JSON for scripts (``--json``), errors on
stderr with the API's code, message and request id."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import click

from te.client import ApiError, Client, TeError

#: Cells longer than this are cut in tables (``--json`` shows everything).
MAX_CELL = 48


class Options:
    """What the top-level options chose; commands read it from ``ctx.obj``."""

    def __init__(self) -> None:
        self.json = False
        self.url: str | None = None
        self.api_key: str | None = None
        self._client: Client | None = None

    def client(self) -> Client:
        """The SDK client, built on first use (so ``--help`` needs no configuration)."""
        if self._client is None:
            env = dict(os.environ)
            if self.url:
                env["TE_URL"] = self.url
            if self.api_key:
                env["TE_API_KEY"] = self.api_key
            self._client = Client.from_env(env)
        return self._client


def settings() -> Options:
    return click.get_current_context().find_object(Options) or Options()


def _set_json(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.ensure_object(Options).json = True


def json_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--json`` on a command (also accepted before the command, on ``te`` itself)."""
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=_set_json,
        help="Print the API's JSON instead of a table.",
    )(command)


def cell(value: Any) -> str:
    if value is None:
        return "-"
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    text = text.replace("\n", " ")
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def table(rows: Iterable[dict[str, Any]], columns: Sequence[str]) -> None:
    """Rows as an aligned table with a header; ``(none)`` when empty."""
    cells = [[cell(row.get(c)) for c in columns] for row in rows]
    if not cells:
        click.echo("(none)")
        return
    header = [c.upper() for c in columns]
    widths = [max(len(r[i]) for r in [header, *cells]) for i in range(len(columns))]
    for line in [header, *cells]:
        click.echo("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip())


def record(data: dict[str, Any]) -> None:
    """One object as ``key: value`` lines (nested values as compact JSON)."""
    width = max((len(k) for k in data), default=0)
    for key, value in data.items():
        shown = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        click.echo(f"{key.ljust(width)}  {'-' if value is None else shown}")


def show(data: Any, columns: Sequence[str] | None = None) -> None:
    """``data`` as JSON (``--json``), else a table (a list) or a record (an object)."""
    if settings().json:
        click.echo(json.dumps(data, indent=2, sort_keys=True))
    elif isinstance(data, list):
        table(data, columns or sorted({k for row in data for k in row}))
    elif isinstance(data, dict):
        record(data)
    else:
        click.echo(str(data))


def fail(exc: TeError) -> None:
    """Report an error on stderr (the envelope as JSON with ``--json``) and exit 1."""
    if isinstance(exc, ApiError):
        if settings().json and exc.body is not None:
            click.echo(json.dumps(exc.body, sort_keys=True), err=True)
        else:
            rid = f", request {exc.request_id}" if exc.request_id else ""
            click.echo(f"Error: {exc.message} ({exc.code}, HTTP {exc.status}{rid})", err=True)
    else:
        click.echo(f"Error: {exc}", err=True)
    raise click.exceptions.Exit(1)


def read_document(path: Path) -> Any:
    """A JSON or YAML file's content (``-`` reads stdin); a clear error when malformed."""
    text = sys.stdin.read() if str(path) == "-" else _read(path)
    try:
        return json.loads(text)
    except ValueError:
        pass
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise click.BadParameter(f"{path} is neither JSON nor YAML: {exc}") from exc


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise click.BadParameter(f"cannot read {path}: {exc.strerror}") from exc


def read_object(path: Path) -> dict[str, Any]:
    document = read_document(path)
    if not isinstance(document, dict):
        raise click.BadParameter(f"{path} must hold one object (a mapping)")
    return document
