"""Request parsing, the error envelope, and the route wrapper every view goes through.

This is the one place that maps :class:`~chalicelib.errors.TaskExecutorError` to an HTTP
status and ``{"error": {"code", "message", "request_id"}}``. Views raise domain errors and
return plain data; they never build error responses and never catch broadly.
"""

from __future__ import annotations

import contextvars
import decimal
import json
import logging
import math
import re
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from chalice import Blueprint, Response
from chalice.app import Request

from chalicelib.api.context import ApiApp, ApiContext
from chalicelib.domain.timefmt import iso
from chalicelib.errors import (
    DatabaseError,
    InvalidRequest,
    PayloadTooLarge,
    RateLimited,
    SecretKeyError,
    TaskExecutorError,
    ValidationFailed,
)

log = logging.getLogger(__name__)

MAX_JSON_DEPTH = 32
JSON_HEADERS: dict[str, Any] = {"Content-Type": "application/json"}

_request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="")


def new_request_id() -> str:
    value = "req_" + secrets.token_hex(12)
    _request_id.set(value)
    return value


def current_request_id() -> str:
    return _request_id.get() or new_request_id()


@dataclass
class ApiResponse:
    """What a view returns when it needs a status other than 200 or extra headers."""

    body: Any
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


def error_body(code: str, message: str, request_id: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "request_id": request_id}}


# Messages of these errors may carry SQL, query names or server text: never shown to clients.
# A database error is hidden whatever its status (a 400 InvalidData quotes the server's
# reason, a 409 unique or foreign key violation its detail); the code says what happened.
_HIDDEN = {
    400: "The database refused a value of the request.",
    409: "The request conflicts with data written before or concurrently; retry it.",
    500: "An internal error occurred.",
    503: "The service is temporarily unavailable; retry shortly.",
}


def public_message(exc: TaskExecutorError) -> str:
    """What a client may read: the message, except for infrastructure failures."""
    if isinstance(exc, DatabaseError) or (exc.status >= 500 and isinstance(exc, SecretKeyError)):
        return _HIDDEN.get(exc.status, _HIDDEN[500])
    return exc.message


def error_response(exc: TaskExecutorError) -> Response:
    request_id = current_request_id()
    headers: dict[str, Any] = {**JSON_HEADERS, "X-Request-Id": request_id}
    if isinstance(exc, RateLimited):
        headers["Retry-After"] = str(exc.retry_after_sec)
    body = error_body(exc.code, public_message(exc), request_id)
    body["error"].update(getattr(exc, "public_fields", {}))
    return Response(
        body=json.dumps(body),
        status_code=exc.status,
        headers=headers,
    )


def internal_error_response() -> Response:
    request_id = current_request_id()
    return Response(
        body=json.dumps(error_body("INTERNAL_ERROR", "An internal error occurred.", request_id)),
        status_code=500,
        headers={**JSON_HEADERS, "X-Request-Id": request_id},
    )


def shown(view: object, names: tuple[str, ...]) -> dict[str, Any]:
    """``{name: view.<name>}`` for ``names``, in order; timestamps as ISO 8601 UTC (``...Z``).

    Renderers of views whose JSON fields carry their attribute names use this, so a
    representation is the list of what it shows.
    """
    return {name: _plain(getattr(view, name)) for name in names}


def _plain(value: Any) -> Any:
    return iso(value) if isinstance(value, datetime) else value


def to_response(result: Any, status: int = 200) -> Response:
    if isinstance(result, Response):
        return result
    headers: dict[str, Any] = dict(JSON_HEADERS)
    if isinstance(result, ApiResponse):
        headers.update(result.headers)
        status, result = result.status, result.body
    headers["X-Request-Id"] = current_request_id()
    return Response(body=json.dumps(result, default=str), status_code=status, headers=headers)


# -- request parsing ---------------------------------------------------------------------


def _storable(text: str) -> bool:
    """False for NUL and lone surrogates: PostgreSQL's TEXT/JSONB cannot hold either."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


#: The only JSON spellings of what the database cannot store: ``\u0000`` and a UTF-16
#: surrogate escape (a pair is fine, but telling a pair from a lone half needs the decoded
#: strings). A body decoded as strict UTF-8 holds neither unless it spells one this way.
_RISKY_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


def _inspect(value: Any, limit: int, text: str) -> tuple[int, bool]:
    """Nesting depth of decoded JSON and whether every key and string can be stored.

    Iterative (no recursion on hostile input). JSON may spell NUL (``\\u0000``) and lone
    UTF-16 surrogates, which the database refuses: they must be a 400, not a database error.
    Strings are looked at only when ``text`` (the body as sent) spells one of those;
    otherwise only containers are walked (a batch of 1,000 jobs: ~2,000 of them, not every
    value; 24 ms of such a body before).
    """
    strings = _RISKY_ESCAPE.search(text) is not None
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > limit:
            break
        if isinstance(node, dict | list):
            if not _push_children(stack, node, depth + 1, strings):
                return deepest, False
        elif isinstance(node, str) and not _storable(node):  # scalars: pushed with strings
            return deepest, False
    return deepest, True


def _push_children(
    stack: list[tuple[Any, int]], node: dict[str, Any] | list[Any], depth: int, strings: bool
) -> bool:
    """Pushes a container's children at ``depth`` (its scalars too when ``strings`` are
    looked at); False when one of its keys cannot be stored."""
    if isinstance(node, dict):
        if strings and not all(_storable(k) for k in node):
            return False
        children: Any = node.values()
    else:
        children = node
    stack.extend((v, depth) for v in children if strings or isinstance(v, dict | list))
    return True


class _NonFinite(ValueError):
    """A JSON number that is not finite: ``NaN``, ``Infinity``, ``-Infinity`` (Python's
    extensions to JSON) or a literal beyond the double range (``1e400``)."""


def _finite_float(literal: str) -> float:
    value = float(literal)
    if math.isinf(value):  # float() never gives NaN for a JSON number literal
        raise _NonFinite(literal)
    return value


def stored_number_length(value: float) -> int:
    """How many characters ``value`` takes once stored: JSONB keeps numbers exact and writes
    them out without an exponent, so ``1e300`` (5 characters) comes back as 301 digits."""
    sign, digits, exponent = decimal.Decimal(repr(value)).as_tuple()
    assert isinstance(exponent, int)  # a finite float: never 'n', 'N' or 'F'
    if exponent >= 0:
        length = len(digits) + exponent
    elif len(digits) > -exponent:
        length = len(digits) + 1  # the point inside the digits
    else:
        length = 2 - exponent  # "0." then zeros, then the digits
    return length + sign


def _no_constant(name: str) -> float:
    raise _NonFinite(name)


#: What a client reads for a non-finite number (the database would refuse it in JSONB, and
#: its error text must never reach a client).
NON_FINITE_MESSAGE = (
    "Malformed JSON: numbers must be finite (NaN, Infinity, -Infinity and numbers beyond "
    "the double range such as 1e400 are refused)."
)


def contains_nul(values: Iterable[str]) -> bool:
    return any("\x00" in value for value in values)


def _decode(text: str) -> tuple[Any, int]:
    """``json.loads`` with every refusal a 400 INVALID_REQUEST saying why, and how many
    characters the body's numbers gain once stored (:func:`stored_number_length`)."""
    growth = 0

    def number(literal: str) -> float:
        nonlocal growth
        value = _finite_float(literal)
        growth += max(0, stored_number_length(value) - len(literal))
        return value

    try:
        return json.loads(text, parse_float=number, parse_constant=_no_constant), growth
    except _NonFinite as exc:
        raise InvalidRequest(NON_FINITE_MESSAGE) from exc
    except RecursionError as exc:
        raise InvalidRequest(f"JSON nesting deeper than {MAX_JSON_DEPTH} levels.") from exc
    except json.JSONDecodeError as exc:
        raise InvalidRequest(
            f"Malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}."
        ) from exc
    except ValueError as exc:  # Python refuses integer literals over 4,300 digits
        raise InvalidRequest(f"Malformed JSON: a number is too long ({exc}).") from exc


def parse_json_body(raw: bytes | None, *, max_bytes: int) -> dict[str, Any]:
    """Decode a request body that must be one JSON object, with clear 400/413 errors.

    Non-finite numbers are refused here (400): ``json`` accepts ``NaN`` and ``Infinity``
    and turns ``1e400`` into ``inf``, none of which JSONB can hold."""
    if raw is None or not raw.strip():
        raise InvalidRequest("Request body is required and must be a JSON object.")
    if len(raw) > max_bytes:
        raise PayloadTooLarge(f"Request body exceeds {max_bytes} bytes.")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidRequest(f"Request body is not valid UTF-8 (byte {exc.start}).") from exc
    body, growth = _decode(text)
    if len(raw) + growth > max_bytes:
        # Bounded as stored, not only as sent: what is stored is what every read returns.
        raise PayloadTooLarge(
            f"Request body exceeds {max_bytes} bytes once its numbers are written out as "
            f"stored (numbers are kept exact, without exponents: they add {growth} "
            "characters); send very large or very small magnitudes as strings."
        )
    if not isinstance(body, dict):
        raise InvalidRequest("Request body must be a JSON object.")
    depth, storable = _inspect(body, MAX_JSON_DEPTH, text)
    if depth > MAX_JSON_DEPTH:
        raise InvalidRequest(f"JSON nesting deeper than {MAX_JSON_DEPTH} levels.")
    if not storable:
        raise InvalidRequest(
            "Strings in the request body must not contain NUL (\\u0000) or lone surrogates."
        )
    return body


def check_fields(
    body: Mapping[str, Any], *, required: Iterable[str] = (), optional: Iterable[str] = ()
) -> None:
    """Reject unknown and missing top-level fields (400 INVALID_REQUEST), listing them."""
    required = list(required)
    allowed = set(required) | set(optional)
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise ValidationFailed(f"Unknown field(s): {', '.join(unknown)}.")
    missing = [name for name in required if body.get(name) is None]
    if missing:
        raise ValidationFailed(f"Missing required field(s): {', '.join(missing)}.")


def expect_type(body: Mapping[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    """``body[name]`` if present and of ``kind`` (bool is never accepted as int)."""
    value = body.get(name)
    if value is None:
        return None
    kinds = kind if isinstance(kind, tuple) else (kind,)
    bad_bool = isinstance(value, bool) and bool not in kinds
    if bad_bool or not isinstance(value, kinds):
        names = " or ".join(_json_type_name(k) for k in kinds)
        raise ValidationFailed(f"Field '{name}' must be {names}.")
    return value


def _json_type_name(kind: type) -> str:
    return {
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "a boolean",
        dict: "an object",
        list: "an array",
    }.get(kind, kind.__name__)


def query_param(request: Request, name: str) -> str | None:
    params: Mapping[str, str] = request.query_params or {}
    return params.get(name)


# -- resources ---------------------------------------------------------------------------


class Resource:
    """A Chalice Blueprint whose views are wrapped by the error mapper.

    ``@resource.route("/configs", methods=["POST"], status=201)`` registers a view that
    returns data (or an :class:`ApiResponse`); raised domain errors become the envelope.
    """

    def __init__(self, import_name: str) -> None:
        self.blueprint = Blueprint(import_name)

    @property
    def request(self) -> Request:
        request = self.blueprint.current_request
        assert request is not None
        return request

    @property
    def services(self) -> ApiContext:
        """The process's services (:class:`~chalicelib.api.context.ApiContext`)."""
        app = self.blueprint.current_app
        assert isinstance(app, ApiApp), "register the resource on an ApiApp"
        return app.context

    def json_body(self) -> dict[str, Any]:
        raw = self.request.raw_body
        data = raw.encode("utf-8") if isinstance(raw, str) else raw
        return parse_json_body(data, max_bytes=self.services.max_body_bytes)

    def route(
        self, path: str, *, methods: list[str], status: int = 200, beats: bool = True
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register ``view``; ``beats=False`` for a route that must not touch the database
        (liveness): every other request lets the process beat (``ApiContext.served``)."""

        def decorator(view: Callable[..., Any]) -> Callable[..., Any]:
            def wrapped(**kwargs: Any) -> Response:
                try:
                    if beats:
                        self.services.served()
                    return to_response(view(**kwargs), status)
                except TaskExecutorError as exc:
                    if exc.status >= 500:
                        log.error("request failed: %s", exc.message, exc_info=True)
                    return error_response(exc)
                except Exception:
                    log.exception("unhandled error in %s %s", methods, path)
                    return internal_error_response()

            wrapped.__name__ = view.__name__
            wrapped.__doc__ = view.__doc__
            self.blueprint.route(path, methods=methods, content_types=["application/json"])(wrapped)
            return view

        return decorator
