"""Topics: a name and the endpoints ``POST /jobs {"topic": NAME}`` fans out to.

A topic is a catalogue resource (:class:`~chalicelib.services.catalogue.CatalogueService`:
list, get and delete as the others; create and replace here). Its endpoints must be live
(404 ENDPOINT_NOT_FOUND naming the first that is not, as for a job's endpoint), checked in
the transaction that writes the list; each is linked in ``topic_endpoints`` so that
deleting an endpoint a topic names is refused (409 CONFLICT,
:func:`refuse_if_in_topics`). Replacing the list does not touch jobs created from the old
one; deleting a topic deletes it for real (nothing refers to it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import ClassVar

from chalicelib.db.connection import Row, Transaction
from chalicelib.db.queries import queries
from chalicelib.errors import Conflict, EndpointNotFound, TopicNotFound
from chalicelib.services import catalogue
from chalicelib.services.catalogue import AnyKind, CatalogueService, Stamped


@dataclass(frozen=True, kw_only=True)
class TopicView(Stamped):
    """A topic: the endpoints it fans out to, in its order."""

    endpoints: list[str]

    @classmethod
    def from_row(cls, row: Row) -> TopicView:
        return cls(**Stamped.stamps(row), endpoints=list(row["value"]))


def _not_found(name: str) -> TopicNotFound:
    return TopicNotFound(f"Topic '{name}' does not exist.")


def topic_endpoints_in(tx: Transaction, name: str) -> list[str]:
    """The endpoints of topic ``name`` as ``tx`` reads them (404 TOPIC_NOT_FOUND)."""
    row = catalogue.get(tx, "topic", name)
    if row is None:
        raise _not_found(name)
    return list(row["value"])


def check_endpoints(tx: Transaction, names: list[str]) -> None:
    """404 ENDPOINT_NOT_FOUND for the first of ``names`` that is not a live endpoint."""
    rows = tx.run(queries["topics_live_endpoints"], names=names)
    live = {str(row["name"]) for row in rows}
    for name in names:
        if name not in live:
            raise EndpointNotFound(f"Endpoint '{name}' does not exist.")


def refuse_if_in_topics(tx: Transaction, endpoint: str) -> None:
    """409 CONFLICT while topics name the endpoint (up to ten named)."""
    rows = tx.run(
        queries["topics_naming_endpoint"], name=endpoint, limit=catalogue.DEPENDENTS_SHOWN + 1
    )
    topics = [str(row["topic"]) for row in rows]
    if topics:
        raise Conflict(
            f"Endpoint '{endpoint}' is used by topic(s) {catalogue.name_list(topics)}: "
            "remove it from those topics or delete them first."
        )


@dataclass(frozen=True)
class TopicService(CatalogueService[TopicView]):
    """Create, list, get, replace and delete topics; one transaction each."""

    kind: ClassVar[AnyKind] = "topic"
    label: ClassVar[str] = "Topic"
    tx_prefix: ClassVar[str] = "topic"

    def view(self, row: Row) -> TopicView:
        return TopicView.from_row(row)

    def not_found(self, name: str) -> TopicNotFound:
        return _not_found(name)

    def create(self, name: str, endpoints: list[str]) -> TopicView:
        """The new topic: 409 CONFLICT when the name is taken, 404 for an endpoint."""
        return self.view(self._run(lambda tx: self._create_in(tx, name, endpoints), "create"))

    def replace(self, name: str, endpoints: list[str]) -> TopicView:
        """Replace the topic's endpoints (404 if there is no such topic; never creates)."""
        return self.view(self._run(lambda tx: self._replace_in(tx, name, endpoints), "update"))

    def delete_in(self, tx: Transaction, name: str) -> None:
        """Delete the topic (404 if there is none); its jobs are not touched."""
        if not catalogue.delete(tx, "topic", name):
            raise _not_found(name)

    def _create_in(self, tx: Transaction, name: str, endpoints: list[str]) -> Row:
        value = json.dumps(endpoints)
        row: Row | None = tx.one(queries["catalogue_topic_insert"], name=name, value=value)
        if row is None:
            raise Conflict(f"Topic '{name}' already exists.")
        check_endpoints(tx, endpoints)
        tx.execute(queries["topics_link"], name=name, value=value)
        return row

    def _replace_in(self, tx: Transaction, name: str, endpoints: list[str]) -> Row:
        value = json.dumps(endpoints)
        row: Row | None = tx.one(queries["catalogue_topic_update"], name=name, value=value)
        if row is None:
            raise _not_found(name)
        check_endpoints(tx, endpoints)
        tx.execute(queries["topics_unlink"], name=name)
        tx.execute(queries["topics_link"], name=name, value=value)
        return row
