"""Endpoints: registered delivery targets (HTTP, KAFKA, REDIS_STREAM).

Validation of the definition lives in :mod:`chalicelib.domain.endpoints` (shape, defaults,
template namespaces, target URLs); this service adds
the checks that need the database, in the same transaction as the write:

* ``payload_spec`` / ``config`` naming nothing: 422 INVALID_PAYLOAD_SPEC_REF /
  INVALID_CONFIG_REF.
* ``{{secret.<name>}}`` naming a secret that does not exist: 422 TEMPLATE_RESOLUTION_FAILED.
* ``spec.signing_secret`` naming no secret, or one whose value is not a ``whsec_`` key:
  422 INVALID_SIGNING_SECRET.
  (``{{config.<key>}}`` keys are not checked against the config's current values: configs
  change independently and are resolved per execution.)

A replacement applies to future jobs only (jobs keep the snapshot taken at their
creation). DELETE is a soft delete refused (409 CONFLICT) while live jobs use the endpoint,
while live endpoints name it as a default callback, while live work (jobs, batches)
names it as a callback still to fire, and while a topic names it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from chalicelib.crypto import SecretBox
from chalicelib.db.connection import Row, Transaction
from chalicelib.db.queries import queries
from chalicelib.domain.auto_pause import PausedReason
from chalicelib.domain.endpoint_listing import NO_NAMES, EndpointFilter, names_for
from chalicelib.domain.endpoints import EndpointDefinition, endpoint_snapshot
from chalicelib.domain.health import Health
from chalicelib.domain.pagination import PageRequest
from chalicelib.domain.signing import signing_secret_of
from chalicelib.domain.statuses import EndpointType
from chalicelib.errors import (
    Conflict,
    EndpointNotFound,
    ForeignKeyViolation,
    InvalidCallback,
    InvalidConfigRef,
    InvalidPayloadSpecRef,
    TemplateResolutionFailed,
)
from chalicelib.services import auto_pause, catalogue, keys
from chalicelib.services.catalogue import AnyKind, CatalogueService, Stamped
from chalicelib.services.secrets import check_signing_secret
from chalicelib.services.topics import refuse_if_in_topics

Box = Callable[[], SecretBox]
#: Each endpoint with executions in the health window, by name, and its health.
HealthRead = Callable[[], Mapping[str, Health]]


@dataclass(frozen=True, kw_only=True)
class EndpointView(Stamped):
    """An endpoint with its defaults applied (as a job created now would snapshot it)."""

    type: EndpointType
    payload_spec: str | None
    config: str | None
    spec: dict[str, Any]
    retry_policy: dict[str, Any]
    on_success: str | None  #: default callbacks of its jobs
    on_failure: str | None
    flow_control: dict[str, Any] | None  #: cluster-wide limits, None when it sets none
    ordering: dict[str, Any] | None  #: a failed ordering key head's fate, None: skip
    paused_at: datetime | None  #: set while paused (by hand or by the endpoint itself)
    #: GONE, FAILING or OPERATOR while paused, else None (chalicelib.domain.auto_pause)
    paused_reason: PausedReason | None
    auto_pause_after_ms: int | None  #: None: the FAILING rule is off
    held_until: datetime | None  #: a 429/503 Retry-After holds it back until then

    @classmethod
    def from_row(cls, row: Row) -> EndpointView:
        snapshot = endpoint_snapshot(row)
        return cls(
            **Stamped.stamps(row),
            type=EndpointType(snapshot["type"]),
            payload_spec=row["payload_spec_ref"],
            config=row["config_ref"],
            spec=snapshot["spec"],
            retry_policy=snapshot["retry_policy"],
            on_success=row["on_success"],
            on_failure=row["on_failure"],
            flow_control=row["flow_control"],
            ordering=row["ordering"],
            paused_at=row["paused_at"],
            paused_reason=_reason(row["paused_reason"]),
            auto_pause_after_ms=row["auto_pause_after_ms"],
            held_until=row["held_until"],
        )


def _reason(value: str | None) -> PausedReason | None:
    return None if value is None else PausedReason(value)


def _not_found(name: str) -> EndpointNotFound:
    return EndpointNotFound(f"Endpoint '{name}' does not exist.")


def check_references(
    tx: Transaction, definition: EndpointDefinition, box: Box | None = None
) -> None:
    """Payload spec, config and secrets the endpoint names must exist (422 otherwise); a
    signing secret must hold a whsec_ key (checked with ``box`` when given)."""
    if definition.payload_spec and not catalogue.get(tx, "payload_spec", definition.payload_spec):
        raise InvalidPayloadSpecRef(
            f"Payload spec '{definition.payload_spec}' does not exist: create it first."
        )
    if definition.config and not catalogue.get(tx, "config", definition.config):
        raise InvalidConfigRef(f"Config '{definition.config}' does not exist: create it first.")
    for callback in (definition.on_success, definition.on_failure):
        if callback and callback != definition.name and not catalogue.get(tx, "endpoint", callback):
            raise InvalidCallback(f"Callback endpoint '{callback}' does not exist.")
    wanted = sorted(definition.secrets)
    missing = sorted(set(wanted) - catalogue.existing_secrets(tx, wanted))
    if missing:
        raise TemplateResolutionFailed(
            "The spec references secret(s) that do not exist: "
            + ", ".join(f"{{{{secret.{m}}}}}" for m in missing)
            + "."
        )
    signer = signing_secret_of(definition.spec)
    if signer is not None:
        check_signing_secret(tx, signer, box)


def register(tx: Transaction, definition: EndpointDefinition, box: Box | None = None) -> Row:
    """Insert a new endpoint after checking its name and references (one transaction)."""
    if catalogue.get(tx, "endpoint", definition.name) is not None:
        raise Conflict(f"Endpoint '{definition.name}' already exists.")
    check_references(tx, definition, box)
    row = catalogue.insert_endpoint(tx, definition)
    if row is None:
        raise Conflict(f"Endpoint '{definition.name}' already exists.")
    _ensure_flow_row(tx, definition, previous=None)
    auto_pause.forget(tx, definition.name)  # a name registered again starts afresh
    return row


def replace_in(tx: Transaction, definition: EndpointDefinition, box: Box | None = None) -> Row:
    """Replace an existing endpoint's definition (404 if there is none; never creates)."""
    previous = catalogue.get(tx, "endpoint", definition.name)
    if previous is None:
        raise _not_found(definition.name)
    check_references(tx, definition, box)
    row = catalogue.update_endpoint(tx, definition)
    if row is None:
        raise _not_found(definition.name)
    _ensure_flow_row(tx, definition, previous=previous)
    return row


def _rate_limit(flow_control: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    return (flow_control or {}).get("rate_limit")


def _ensure_flow_row(
    tx: Transaction, definition: EndpointDefinition, *, previous: Row | None
) -> None:
    """The row the worker's metered claim locks and debits, in the definition's transaction.

    A rate limit that is new (a new endpoint, or ``previous``, the definition replaced, had
    none) starts with a full bucket: its ``limit`` can be claimed at once. A rate limit that
    replaces another keeps the bucket's tokens (so re-sending a definition refills nothing).
    """
    if definition.flow_control is None:
        return
    rate = _rate_limit(definition.flow_control)
    was_limited = previous is not None and _rate_limit(previous["flow_control"]) is not None
    tx.execute(
        queries["catalogue_endpoint_flow_ensure"],
        name=definition.name,
        tokens=float(rate["limit"]) if rate else 0.0,
        fill=rate is not None and not was_limited,
    )


def refuse_if_callback_target(tx: Transaction, name: str) -> None:
    """409 CONFLICT while the endpoint is a callback target of live endpoints (their default
    on_success / on_failure: their new jobs would be refused), of live jobs (on_success /
    on_failure) or of live batches (on_complete) whose callback is still to fire. Finished
    work does not pin it (``catalogue_endpoint_live_callbacks`` says what is live and what the
    read costs)."""
    limit = catalogue.DEPENDENTS_SHOWN + 1
    endpoints = [
        str(r["name"])
        for r in tx.run(queries["catalogue_endpoint_dependents"], name=name, limit=limit)
    ]
    rows = tx.run(queries["catalogue_endpoint_live_callbacks"], name=name, limit=limit)
    jobs = [str(r["ref"]) for r in rows if r["kind"] == "job"]
    batches = [str(r["ref"]) for r in rows if r["kind"] == "batch"]
    users = []
    if endpoints:
        users.append(
            f"endpoint(s) {catalogue.name_list(endpoints)} (default on_success / on_failure)"
        )
    if jobs:
        users.append(f"live job(s) {catalogue.name_list(jobs)} (on_success / on_failure)")
    if batches:
        users.append(f"live batch(es) {catalogue.name_list(batches)} (on_complete)")
    if users:
        raise Conflict(
            f"Endpoint '{name}' is the callback of {' and of '.join(users)}: deleting it would "
            "lose those callbacks; change those endpoints, cancel that work or let it finish "
            "first."
        )


@dataclass(frozen=True)
class EndpointService(CatalogueService[EndpointView]):
    """Register, list, get, replace and delete-unless-used endpoints.

    ``box`` decrypts a signing secret to check its form at registration (None: left to the
    worker); ``health_read`` reads the endpoints' health for a list filtered by it (the
    overview's, :meth:`OverviewService.endpoint_health`; None: such a filter keeps every
    endpoint judged, i.e. none but IDLE ones)."""

    box: Box | None = None
    health_read: HealthRead | None = None

    kind: ClassVar[AnyKind] = "endpoint"
    label: ClassVar[str] = "Endpoint"
    tx_prefix: ClassVar[str] = "endpoint"

    def view(self, row: Row) -> EndpointView:
        return EndpointView.from_row(row)

    def not_found(self, name: str) -> EndpointNotFound:
        return _not_found(name)

    def endpoints_using(self, tx: Transaction, name: str) -> list[str]:
        return []  # those naming it as a default callback: refuse_if_callback_target

    def delete_in(self, tx: Transaction, name: str) -> None:
        """Delete unless live jobs of the endpoint use it (the base rule), a live endpoint
        or live work names it as a callback, or a topic names it (409 CONFLICT saying so)."""
        if catalogue.get(tx, "endpoint", name) is not None:
            refuse_if_callback_target(tx, name)
            refuse_if_in_topics(tx, name)
        super().delete_in(tx, name)

    def list_page(
        self, page: PageRequest, wanted: EndpointFilter | None = None
    ) -> list[EndpointView]:
        """Up to ``page.limit + 1`` endpoints after the cursor, newest first, those
        ``wanted`` keeps (paused or not, a health)."""
        wanted = wanted or EndpointFilter()
        names = NO_NAMES
        if wanted.health is not None:
            judged = self.health_read() if self.health_read is not None else {}
            names = names_for(wanted.health, judged).params()
        params = {**page.params(), **names, "paused": wanted.paused}
        rows = self._run(lambda tx: tx.run(queries["catalogue_endpoint_list"], **params), "list")
        return [self.view(row) for row in rows]

    def create(self, definition: EndpointDefinition) -> EndpointView:
        """Register an endpoint: 409 if the name is taken, 422 for a missing reference."""
        return self._write(lambda tx: register(tx, definition, self.box), "create")

    def replace(self, definition: EndpointDefinition) -> EndpointView:
        """Replace a definition, type included (future jobs only)."""
        return self._write(lambda tx: replace_in(tx, definition, self.box), "update")

    def blocked_keys(
        self, name: str, *, after: str | None, limit: int
    ) -> tuple[list[keys.BlockedKey], bool]:
        """One page of the endpoint's blocked ordering keys after key ``after``, by key:
        (keys, more). 404 for an unknown endpoint."""

        def work(tx: Transaction) -> tuple[list[keys.BlockedKey], bool]:
            self._require(tx, name)
            return keys.blocked_page(tx, name, after=after, limit=limit)

        return self._run(work, "ordering_keys")

    def skip_key(self, name: str, key: str) -> None:
        """Unblock the endpoint's ordering key ``key``: its failed head stays FAILED and the
        next execution of the key starts. 404 for an unknown endpoint, 409 when the key is
        not blocked."""

        def work(tx: Transaction) -> None:
            self._require(tx, name)
            keys.skip(tx, name, key)

        self._run(work, "ordering_skip")

    def _require(self, tx: Transaction, name: str) -> None:
        if catalogue.get(tx, "endpoint", name) is None:
            raise _not_found(name)

    def pause(self, name: str) -> EndpointView:
        """Stop claims of the endpoint's executions: an OPERATOR pause (idempotent: the
        first paused_at and its reason stay)."""
        return self._set_paused(name, "pause")

    def resume(self, name: str) -> EndpointView:
        """Let claims take the endpoint's executions again, whatever paused it (the reason
        is cleared; idempotent)."""
        return self._set_paused(name, "resume")

    def _set_paused(self, name: str, verb: str) -> EndpointView:
        row = self._run(lambda tx: tx.one(queries[f"catalogue_endpoint_{verb}"], name=name), verb)
        if row is None:
            raise _not_found(name)
        return self.view(row)

    def _write(self, work: Callable[[Transaction], Row], verb: str) -> EndpointView:
        """Run a write; a reference deleted concurrently (foreign key) is the matching 422."""
        try:
            row: Row = self._run(work, verb)
        except ForeignKeyViolation as exc:
            if "fk_endpoints_config" in str(exc):
                raise InvalidConfigRef("The referenced config was deleted concurrently.") from exc
            raise InvalidPayloadSpecRef(
                "The referenced payload spec was deleted concurrently."
            ) from exc
        return self.view(row)
