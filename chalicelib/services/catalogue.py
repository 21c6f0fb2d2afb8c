"""The lifecycle payload specs, configs, secrets and endpoints share, over named SQL.

They are named resources with the same lifecycle (create, list, get, replace,
delete-unless-referenced). :class:`CatalogueService` holds list, get and delete once;
:class:`NamedValueService` adds create and replace for the three kinds whose whole value is
one column (payload specs, configs, secrets); endpoints add their own in
:mod:`chalicelib.services.endpoints`.

The row functions below take an open :class:`~chalicelib.db.connection.Transaction`, so a
use case decides what happens atomically (a delete and its dependency check share one
transaction). The three catalogue tables share statement shapes; ``kind`` selects the table
(``payload_spec``, ``config`` or ``secret``) and ``value`` is its value column. Its
statements are ``catalogue_*`` in ``db/sql/catalogue.sql`` (the worker's caches read some of
them); route -> service -> SQL, as for jobs and executions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Generic, Literal, TypeVar

from chalicelib.db.connection import Database, Row, Transaction
from chalicelib.db.queries import queries
from chalicelib.db.shapes import shaped
from chalicelib.domain.endpoints import EndpointDefinition
from chalicelib.domain.pagination import PageRequest
from chalicelib.domain.signing import signing_secret_of
from chalicelib.domain.templates import secret_names
from chalicelib.errors import Conflict, TaskExecutorError

Kind = Literal["payload_spec", "config", "secret"]
AnyKind = Kind | Literal["endpoint", "topic"]
V = TypeVar("V")

#: How many dependents a 409 names (one more is fetched to say "and more").
DEPENDENTS_SHOWN = 10


def _value_param(kind: Kind, value: Any) -> Any:
    """Secrets are ciphertext bytes; the others are JSON documents sent as text."""
    return value if kind == "secret" else json.dumps(value)


def insert(tx: Transaction, kind: Kind, name: str, value: Any) -> Row | None:
    """The new row, or None when ``name`` is taken."""
    return tx.one(queries[f"catalogue_{kind}_insert"], name=name, value=_value_param(kind, value))


def get(tx: Transaction, kind: AnyKind, name: str) -> Row | None:
    """The live row named ``name`` (columns as in the table), or None."""
    return tx.one(queries[f"catalogue_{kind}_get"], name=name)


def update(tx: Transaction, kind: Kind, name: str, value: Any) -> Row | None:
    """The updated row, or None when there is no such row."""
    return tx.one(queries[f"catalogue_{kind}_update"], name=name, value=_value_param(kind, value))


def delete(tx: Transaction, kind: AnyKind, name: str) -> bool:
    return tx.execute(queries[f"catalogue_{kind}_delete"], name=name) > 0


def list_page(tx: Transaction, kind: AnyKind, page: PageRequest) -> list[Row]:
    """Up to ``page.limit + 1`` rows after the cursor, newest first (a list whose cursor
    line is tagged is cut to the page's shape: :func:`chalicelib.db.shapes.shaped`)."""
    query, params = shaped(queries[f"catalogue_{kind}_list"], page.params())
    return tx.run(query, **params)


def endpoints_using(tx: Transaction, kind: Kind, name: str) -> list[str]:
    """Names of live endpoints referencing a payload spec, config or secret.

    Payload specs and configs: at most DEPENDENTS_SHOWN + 1. Secrets: the query finds
    endpoints whose spec text contains ``secret.<name>`` (candidates) or that sign with it;
    a candidate counts when one of its placeholders really names the secret or its
    ``signing_secret`` does.
    """
    if kind == "secret":
        candidates = tx.run(
            queries["catalogue_secret_dependents"], needle=f"secret.{name}", name=name
        )
        return [
            str(r["name"])
            for r in candidates
            if name in secret_names(r["spec"]) or signing_secret_of(r["spec"]) == name
        ]
    rows = tx.run(queries[f"catalogue_{kind}_dependents"], name=name, limit=DEPENDENTS_SHOWN + 1)
    return [str(r["name"]) for r in rows]


def existing_secrets(tx: Transaction, names: list[str]) -> set[str]:
    if not names:
        return set()
    rows = tx.run(queries["catalogue_secrets_existing"], names=names)
    return {str(r["name"]) for r in rows}


def _endpoint_params(definition: EndpointDefinition) -> dict[str, Any]:
    return {
        "name": definition.name,
        "endpoint_type": definition.type,
        "payload_spec_ref": definition.payload_spec,
        "config_ref": definition.config,
        "spec": json.dumps(definition.spec),
        "retry_policy": json.dumps(definition.retry_policy),
        "on_success": definition.on_success,
        "on_failure": definition.on_failure,
        "flow_control": None
        if definition.flow_control is None
        else json.dumps(definition.flow_control),
        "auto_pause_after_ms": definition.auto_pause_after_ms,
        "ordering": None if definition.ordering is None else json.dumps(definition.ordering),
    }


def insert_endpoint(tx: Transaction, definition: EndpointDefinition) -> Row | None:
    """The new endpoint row, or None when the name is taken."""
    return tx.one(queries["catalogue_endpoint_insert"], **_endpoint_params(definition))


def update_endpoint(tx: Transaction, definition: EndpointDefinition) -> Row | None:
    """The replaced endpoint row, or None when there is no such endpoint."""
    return tx.one(queries["catalogue_endpoint_update"], **_endpoint_params(definition))


def live_jobs_using(tx: Transaction, kind: AnyKind, name: str) -> list[str]:
    """Ids of live jobs (``live_jobs``) whose endpoint or snapshot uses ``name``, newest first.

    At most DEPENDENTS_SHOWN + 1. For a secret the match is on ``{{secret.<name>}}`` in the
    snapshot's spec (:func:`secret_pattern`) or on its ``signing_secret``.
    """
    if kind == "secret":
        params: dict[str, Any] = {"pattern": secret_pattern(name), "name": name}
    else:
        params = {"name": name}
    rows = tx.run(queries[f"catalogue_{kind}_live_jobs"], limit=DEPENDENTS_SHOWN + 1, **params)
    return [str(r["job_id"]) for r in rows]


def secret_pattern(name: str) -> str:
    """A regular expression matching every ``{{secret.<name>}}`` in a spec's JSON text.

    ``{{``, anything but ``}``, then ``secret.<name>`` not followed by a character that
    could continue a placeholder path. Valid in PostgreSQL's and CockroachDB's (RE2)
    dialects: ``re.escape`` of a stored name only produces ``\\-`` escapes.
    """
    return r"\{\{[^}]*secret\." + re.escape(name) + r"([^A-Za-z0-9_.-]|$)"


def name_list(names: list[str]) -> str:
    """``a, b, c`` or ``a, b, ... (and more)`` when the query hit its bound."""
    shown = ", ".join(names[:DEPENDENTS_SHOWN])
    return shown + (", ... (and more)" if len(names) > DEPENDENTS_SHOWN else "")


def refuse_if_used(what: str, *, endpoints: list[str], jobs: list[str]) -> None:
    """409 CONFLICT naming the live endpoints and (up to 10) live jobs that use ``what``.

    "Live" jobs are those of the ``live_jobs`` view: ACTIVE cron jobs and jobs with an
    execution not yet terminal. Finished work and deleted endpoints are history: they do
    not pin anything.
    """
    users, remedies = [], []
    if endpoints:
        users.append(f"endpoint(s) {name_list(endpoints)}")
        remedies.append("change or delete the endpoints")
    if jobs:
        users.append(f"live job(s) {name_list(jobs)}")
        remedies.append("cancel the jobs or let them finish")
    if users:
        raise Conflict(
            f"{what} is used by {' and by '.join(users)}: {' and '.join(remedies)} first."
        )


@dataclass(frozen=True, kw_only=True)
class Stamped:
    """What every catalogue view has: its name and when it was created and last replaced."""

    name: str
    created_at: datetime
    updated_at: datetime

    @staticmethod
    def stamps(row: Row) -> dict[str, Any]:
        return {
            "name": row["name"],
            "created_at": row["created_at"],
            "updated_at": row["updated_at"],
        }


@dataclass(frozen=True)
class CatalogueService(Generic[V]):
    """List, get and delete-unless-used of one kind; each use case is one transaction.

    Subclasses name their ``kind``, the ``label`` their messages use ("Config"), the
    prefix of their transaction names, and how a row becomes their view.
    """

    db: Database

    kind: ClassVar[AnyKind]
    label: ClassVar[str]
    tx_prefix: ClassVar[str]

    def view(self, row: Row) -> V:
        raise NotImplementedError

    def not_found(self, name: str) -> TaskExecutorError:
        raise NotImplementedError

    def endpoints_using(self, tx: Transaction, name: str) -> list[str]:
        """Live endpoints that reference the resource named ``name``."""
        raise NotImplementedError

    def written(self, verb: str, name: str) -> None:
        """Called after a committed write (``created``, ``updated``, ``deleted``)."""

    def _run(self, work: Callable[[Transaction], Any], verb: str) -> Any:
        return self.db.transaction(work, name=f"{self.tx_prefix}_{verb}")

    def list_page(self, page: PageRequest) -> list[V]:
        """Up to ``page.limit + 1`` views after the cursor, newest first."""
        rows = self._run(lambda tx: list_page(tx, self.kind, page), "list")
        return [self.view(row) for row in rows]

    def get(self, name: str) -> V:
        row = self._run(lambda tx: get(tx, self.kind, name), "get")
        if row is None:
            raise self.not_found(name)
        return self.view(row)

    def delete_in(self, tx: Transaction, name: str) -> None:
        """Delete unless a live endpoint or live job uses it (409 naming them).

        In one SERIALIZABLE transaction with the dependency check: a dependent created
        concurrently (an endpoint registration reading the row this delete marks, a job
        creation inserting rows the live-job check ranges over) makes one of the two
        transactions fail with 40001; the retry sees the other's outcome, so the check and
        the delete act on one consistent state.
        """
        if get(tx, self.kind, name) is None:
            raise self.not_found(name)
        refuse_if_used(
            f"{self.label} '{name}'",
            endpoints=self.endpoints_using(tx, name),
            jobs=live_jobs_using(tx, self.kind, name),
        )
        delete(tx, self.kind, name)

    def delete(self, name: str) -> None:
        self._run(lambda tx: self.delete_in(tx, name), "delete")
        self.written("deleted", name)


@dataclass(frozen=True)
class NamedValueService(CatalogueService[V]):
    """Create and replace for payload specs, configs and secrets (one value column)."""

    kind: ClassVar[Kind]
    update_verb: ClassVar[str] = "update"

    def endpoints_using(self, tx: Transaction, name: str) -> list[str]:
        return endpoints_using(tx, self.kind, name)

    def stored(self, name: str, value: Any) -> Any:
        """The value as stored (validated, or encrypted); before any transaction."""
        return value

    def create(self, name: str, value: Any) -> V:
        """The new resource; 409 CONFLICT when the name is taken."""
        stored = self.stored(name, value)
        row = self._run(lambda tx: insert(tx, self.kind, name, stored), "create")
        if row is None:
            raise Conflict(f"{self.label} '{name}' already exists.")
        self.written("created", name)
        return self.view(row)

    def replace(self, name: str, value: Any) -> V:
        """Replace the value of an existing resource (404 otherwise; it never creates)."""
        stored = self.stored(name, value)
        row = self._run(lambda tx: update(tx, self.kind, name, stored), self.update_verb)
        if row is None:
            raise self.not_found(name)
        self.written("updated", name)
        return self.view(row)
