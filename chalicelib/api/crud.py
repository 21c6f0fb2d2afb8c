"""What the catalogue/register routes share: timestamps, the DELETE answer, PUT names.

Payload specs, configs, secrets, endpoints and topics are named resources with the same lifecycle
(create, list, get, replace, delete-unless-referenced), run by the services in
:mod:`chalicelib.services.catalogue` and documented once in :mod:`chalicelib.api.openapi.catalogue`.
This module holds the HTTP pieces that would otherwise be copied four times.

Conventions every one of them follows:

* ``POST`` answers 201 with the resource; a taken name is 409 CONFLICT.
* ``PUT`` replaces the resource's value (404 if it does not exist; it never creates). A
  ``name`` in the body is optional and must equal the name in the URL.
* ``DELETE`` answers **204 No Content** with an empty body; 409 CONFLICT names dependents.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from chalice import Response

from chalicelib.api.http import Resource, check_fields, shown
from chalicelib.api.pagination import page_response, parse_page
from chalicelib.domain.names import check_catalogue_name
from chalicelib.domain.pagination import PageRequest
from chalicelib.errors import ValidationFailed
from chalicelib.services.catalogue import Stamped


class ValueService(Protocol):
    """What :func:`value_routes` calls: a named resource whose value is one field
    (:class:`~chalicelib.services.catalogue.NamedValueService`, topics)."""

    def create(self, name: str, value: Any, /) -> Any: ...

    def list_page(self, page: PageRequest, /) -> list[Any]: ...

    def get(self, name: str, /) -> Any: ...

    def replace(self, name: str, value: Any, /) -> Any: ...

    def delete(self, name: str, /) -> None: ...


def timestamps(view: Stamped) -> dict[str, Any]:
    return shown(view, ("created_at", "updated_at"))


def no_content() -> Response:
    """The 204 answer of every DELETE (no body, no Content-Type)."""
    return Response(body="", status_code=204, headers={})


def check_body_name(body: Mapping[str, Any], name: str) -> None:
    """A PUT body may repeat the resource's name, but not change it."""
    if body.get("name") not in (None, name):
        raise ValidationFailed("Field 'name' cannot change: it must match the URL.")


def _named(view: Callable[..., Any], name: str) -> Callable[..., Any]:
    view.__name__ = view.__qualname__ = name
    return view


def value_routes(
    resource: Resource,
    collection: str,
    field: str,
    service: Callable[[], ValueService],
    read_value: Callable[[Mapping[str, Any]], Any],
    *,
    shown: bool = True,
    check_name: Callable[[object], str] = check_catalogue_name,
) -> None:
    """Register the five routes of a payload-spec, config, secret or topic collection.

    POST ``{"name", <field>}`` creates (201), GET lists, GET/PUT/DELETE
    ``<collection>/{name}`` read, replace (``{<field>, "name"?}``) and delete (204).
    ``read_value`` takes the value from a body whose fields were checked (the service
    validates it further); ``service`` is built per request; ``check_name`` is the rule a
    new name follows. Representations carry the name, the value as ``field`` unless
    ``shown`` is false (secrets), and timestamps.
    """
    plural = collection.strip("/").replace("-", "_")
    item = f"{collection}/{{name}}"

    def render(view: Any) -> dict[str, Any]:
        value = {field: getattr(view, field)} if shown else {}
        return {"name": view.name, **value, **timestamps(view)}

    def create() -> dict[str, Any]:
        body = resource.json_body()
        check_fields(body, required=["name", field])
        name = check_name(body["name"])
        return render(service().create(name, read_value(body)))

    def listing() -> dict[str, Any]:
        page = parse_page(resource.request.query_params)
        return page_response(service().list_page, page, render=render, id_field="name")

    def get(name: str) -> dict[str, Any]:
        return render(service().get(name))

    def replace(name: str) -> dict[str, Any]:
        body = resource.json_body()
        check_fields(body, required=[field], optional=["name"])
        check_body_name(body, name)
        return render(service().replace(name, read_value(body)))

    def delete(name: str) -> Response:
        service().delete(name)
        return no_content()

    for path, method, view, status in (
        (collection, "POST", create, 201),
        (collection, "GET", listing, 200),
        (item, "GET", get, 200),
        (item, "PUT", replace, 200),
        (item, "DELETE", delete, 200),
    ):
        verb = {"POST": "create", "GET": "get", "PUT": "update", "DELETE": "delete"}[method]
        name = f"list_{plural}" if view is listing else f"{verb}_{plural[:-1]}"
        resource.route(path, methods=[method], status=status)(_named(view, name))
