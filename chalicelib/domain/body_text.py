"""HTTP bodies that are text: a ``body_template`` string rendered for its ``Content-Type``.

An HTTP endpoint whose literal ``Content-Type`` header (in ``spec.headers``, any case,
parameters such as ``charset`` ignored) is one of these sends a ``body_template`` string
as text, each placeholder's value encoded for the type (:func:`text_encoder`):

* ``application/x-www-form-urlencoded``: percent-encoded (a space as ``+``), so
  ``"name={{input.name}}&note={{input.note}}"`` is a form whatever the values hold;
* ``application/xml``, ``text/xml`` and any ``application/*+xml``: XML-escaped (``&``,
  ``<``, ``>``, ``"`` and ``'``), so a value never opens an element or ends an attribute;
* any other ``text/*`` (``text/plain``, ``text/csv``...): as is.

A value that is not a string is written as compact JSON first (``{{input.n}}`` is ``42``).
The string ``"{{input}}"`` alone keeps its meaning for every type (the input as JSON, the
default of an endpoint without a template), and an object ``body_template`` is always sent
as JSON. Any other endpoint accepts only an object or one placeholder, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote_plus

from chalicelib.domain.templates import WHOLE, whole_placeholder

FORM = "application/x-www-form-urlencoded"
_XML_TYPES = ("application/xml", "text/xml")
_XML_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;"})

Encoder = Callable[[str], str]


def _form(value: str) -> str:
    return quote_plus(value, safe="")


def _xml(value: str) -> str:
    return value.translate(_XML_ESCAPES)


def _text(value: str) -> str:
    return value


def content_type(spec: Mapping[str, Any]) -> str | None:
    """The media type of the spec's literal ``Content-Type`` header, lower case, without
    parameters (None: no such header, or one with a placeholder)."""
    headers = spec.get("headers")
    if not isinstance(headers, Mapping):
        return None
    for name, value in headers.items():
        if str(name).lower() == "content-type" and isinstance(value, str):
            if "{{" in value:
                return None
            return value.partition(";")[0].strip().lower()
    return None


def encoder_for(media_type: str | None) -> Encoder | None:
    """How a placeholder's value is written in a body of ``media_type`` (None: JSON)."""
    if media_type is None:
        return None
    if media_type == FORM:
        return _form
    if media_type in _XML_TYPES or (
        media_type.startswith("application/") and media_type.endswith("+xml")
    ):
        return _xml
    if media_type.startswith("text/"):
        return _text
    return None


def is_whole_input(text: str) -> bool:
    """``text`` is ``{{input}}`` alone (spaces allowed): the input as JSON, for any type."""
    placeholder = whole_placeholder(text)
    return placeholder is not None and placeholder.namespace == WHOLE and not placeholder.path


def text_encoder(spec: Mapping[str, Any]) -> Encoder | None:
    """The encoder of an HTTP spec whose ``body_template`` is sent as text, else None."""
    body = spec.get("body_template")
    if not isinstance(body, str) or is_whole_input(body):
        return None
    return encoder_for(content_type(spec))
