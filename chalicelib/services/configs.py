"""Configs: named key-value objects endpoints reference as ``{{config.*}}``.

Updates take effect for future executions; an execution keeps the snapshot its first
attempt resolved. DELETE is a soft delete (the row stays for history, marked); creating the
name again revives it with the new values.

A config's values may decide where an endpoint sends a secret (``{{config.host}}`` in the
URL of an endpoint whose header holds ``{{secret.tok}}``): replacing a config that a live
endpoint or a live job's snapshot uses together with ``{{secret.*}}`` is checked by
``authorize_secrets`` (the API's: such a write needs the scope that writes secret
templates), in the update's transaction.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from chalicelib.db.connection import Row, Transaction
from chalicelib.db.queries import queries
from chalicelib.domain.templates import secret_names
from chalicelib.errors import ConfigNotFound
from chalicelib.services.catalogue import Kind, NamedValueService, Stamped, update

#: Raises when the caller may not write the values of config ``name`` (first argument),
#: which go out with these secrets (second).
SecretCheck = Callable[[str, frozenset[str]], None]


@dataclass(frozen=True, kw_only=True)
class ConfigView(Stamped):
    """A config: its values (any JSON object)."""

    values: dict[str, Any]

    @classmethod
    def from_row(cls, row: Row) -> ConfigView:
        return cls(**Stamped.stamps(row), values=row["value"])


@dataclass(frozen=True)
class ConfigService(NamedValueService[ConfigView]):
    """Create, list, get, replace and delete-unless-used configs.

    ``authorize_secrets`` (None: no check, for callers that are not an API key) is called
    with the secrets sent alongside the config before it is replaced."""

    authorize_secrets: SecretCheck | None = None

    kind: ClassVar[Kind] = "config"
    label: ClassVar[str] = "Config"
    tx_prefix: ClassVar[str] = "config"

    def view(self, row: Row) -> ConfigView:
        return ConfigView.from_row(row)

    def not_found(self, name: str) -> ConfigNotFound:
        return ConfigNotFound(f"Config '{name}' does not exist.")

    def replace(self, name: str, value: Any) -> ConfigView:
        """Replace the values (404 if there is none); checked as the class says."""
        stored = self.stored(name, value)
        row = self._run(lambda tx: self._checked_update(tx, name, stored), self.update_verb)
        if row is None:
            raise self.not_found(name)
        self.written("updated", name)
        return self.view(row)

    def _checked_update(self, tx: Transaction, name: str, stored: Any) -> Row | None:
        if self.authorize_secrets is not None:
            self.authorize_secrets(name, secrets_sent_with(tx, name))
        return update(tx, self.kind, name, stored)


def secrets_sent_with(tx: Transaction, name: str) -> frozenset[str]:
    """Names of the secrets that live endpoints, or live jobs' endpoint snapshots, send in
    templates resolved with config ``name``."""
    rows = tx.run(queries["catalogue_config_secret_specs"], name=name)
    return frozenset(s for r in rows for s in secret_names(json.loads(r["spec"])))
