"""Rows of the setup and register tables (payload specs, configs, secrets, endpoints).

Every function takes an open :class:`~chalicelib.db.connection.Transaction`, so callers
decide what happens atomically (a delete and its dependency check share one transaction).
The three setup tables share statement shapes; ``kind`` selects the table
(``payload_spec``, ``config`` or ``secret``) and ``value`` is its value column.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from chalicelib.db.connection import Row, Transaction
from chalicelib.db.queries import queries
from chalicelib.domain.endpoints import EndpointDefinition
from chalicelib.domain.pagination import PageRequest

Kind = Literal["payload_spec", "config", "secret"]

#: How many dependents a 409 names (one more is fetched to say "and more").
DEPENDENTS_SHOWN = 10


def _value_param(kind: Kind, value: Any) -> Any:
    """Secrets are ciphertext bytes; the others are JSON documents sent as text."""
    return value if kind == "secret" else json.dumps(value)


def insert(tx: Transaction, kind: Kind, name: str, value: Any) -> Row | None:
    """The new row, or None when ``name`` is taken."""
    return tx.one(queries[f"setup_{kind}_insert"], name=name, value=_value_param(kind, value))


def get(tx: Transaction, kind: Kind, name: str) -> Row | None:
    return tx.one(queries[f"setup_{kind}_get"], name=name)


def update(tx: Transaction, kind: Kind, name: str, value: Any) -> Row | None:
    """The updated row, or None when there is no such row."""
    return tx.one(queries[f"setup_{kind}_update"], name=name, value=_value_param(kind, value))


def delete(tx: Transaction, kind: Kind | Literal["endpoint"], name: str) -> bool:
    return tx.execute(queries[f"setup_{kind}_delete"], name=name) > 0


def list_page(tx: Transaction, kind: Kind | Literal["endpoint"], page: PageRequest) -> list[Row]:
    """Up to ``page.limit + 1`` rows after the cursor, newest first."""
    return tx.run(
        queries[f"setup_{kind}_list"],
        after_ts=page.after_ts,
        after_id=page.after_id,
        limit_plus_one=page.limit + 1,
    )


def endpoints_using(
    tx: Transaction, kind: Literal["payload_spec", "config"], name: str
) -> list[str]:
    """Names of endpoints referencing a payload spec or config (at most DEPENDENTS_SHOWN + 1)."""
    rows = tx.run(queries[f"setup_{kind}_dependents"], name=name, limit=DEPENDENTS_SHOWN + 1)
    return [str(r["name"]) for r in rows]


def endpoint_specs_mentioning_secret(tx: Transaction, name: str) -> list[Row]:
    """(name, spec) of endpoints whose spec text contains ``secret.<name>`` (candidates)."""
    return tx.run(queries["setup_secret_dependents"], needle=f"secret.{name}")


def existing_secrets(tx: Transaction, names: list[str]) -> set[str]:
    if not names:
        return set()
    rows = tx.run(queries["setup_secrets_existing"], names=names)
    return {str(r["name"]) for r in rows}


def _endpoint_params(definition: EndpointDefinition) -> dict[str, Any]:
    return {
        "name": definition.name,
        "endpoint_type": definition.type,
        "payload_spec_ref": definition.payload_spec,
        "config_ref": definition.config,
        "spec": json.dumps(definition.spec),
        "retry_policy": json.dumps(definition.retry_policy),
    }


def insert_endpoint(tx: Transaction, definition: EndpointDefinition) -> Row | None:
    """The new endpoint row, or None when the name is taken."""
    return tx.one(queries["setup_endpoint_insert"], **_endpoint_params(definition))


def update_endpoint(tx: Transaction, definition: EndpointDefinition) -> Row | None:
    """The replaced endpoint row, or None when there is no such endpoint."""
    return tx.one(queries["setup_endpoint_update"], **_endpoint_params(definition))


def get_endpoint(tx: Transaction, name: str) -> Row | None:
    """The ``endpoints`` row named ``name`` (columns as in the table), or None.

    Used by job creation with :func:`chalicelib.domain.endpoints.endpoint_snapshot`.
    """
    return tx.one(queries["setup_endpoint_get"], name=name)


def live_jobs_using(tx: Transaction, kind: Kind | Literal["endpoint"], name: str) -> list[str]:
    """Ids of live jobs (``live_jobs``) whose endpoint or snapshot uses ``name``, newest first.

    At most DEPENDENTS_SHOWN + 1. For a secret the match is on ``{{secret.<name>}}`` in the
    snapshot's spec (:func:`secret_pattern`).
    """
    if kind == "secret":
        params: dict[str, Any] = {"pattern": secret_pattern(name)}
    else:
        params = {"name": name}
    rows = tx.run(queries[f"setup_{kind}_live_jobs"], limit=DEPENDENTS_SHOWN + 1, **params)
    return [str(r["job_id"]) for r in rows]


def secret_pattern(name: str) -> str:
    """A regular expression matching every ``{{secret.<name>}}`` in a spec's JSON text.

    ``{{``, anything but ``}``, then ``secret.<name>`` not followed by a character that
    could continue a placeholder path. Valid in PostgreSQL's and CockroachDB's (RE2)
    dialects: ``re.escape`` of a stored name only produces ``\\-`` escapes.
    """
    return r"\{\{[^}]*secret\." + re.escape(name) + r"([^A-Za-z0-9_.-]|$)"
