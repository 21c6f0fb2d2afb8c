"""Payload specs: a JSON Schema that job input is validated against.

A schema is checked against its declared meta-schema (``$schema``), or Draft 2020-12 when
it declares none. An unknown ``$schema`` is rejected rather than silently validated against
another draft: the client asked for rules this service cannot honour.

Two rules keep validation inside the request's own bounds (docs/explanation/design.md:
nothing unbounded runs inside a request):

* **A schema never fetches anything.** ``$ref`` resolves only inside the schema itself (its
  ``$defs``, JSON pointers, embedded ``$id`` resources) or to the bundled JSON Schema
  meta-schemas: the registry has no retrieval, so no URL and no file is ever read. A ref
  that does not resolve that way is refused at creation (422 INVALID_SCHEMA naming it).
* **Every regex runs on RE2** (:mod:`chalicelib.domain.schema_regex`), linear in the input;
  a pattern RE2 cannot compile is refused at creation.

The validator for a schema is compiled once and cached by the schema's content, so each
version of a payload spec is compiled once per process, not once per request.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Any

from chalicelib.domain import schema_regex
from chalicelib.errors import InputValidationFailed, InvalidSchema, ValidationFailed

#: Keywords whose values are data, not subschemas: a "$ref" inside them is not a reference.
_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})
#: Keywords whose values map names to subschemas (a name may be "const" or "$ref").
_SCHEMA_MAPS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)
_REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")
#: Keywords that apply a subschema to the same instance: a cycle through them never ends.
_IN_PLACE_LISTS = ("allOf", "anyOf", "oneOf")
_IN_PLACE_ONE = ("not", "if", "then", "else")
#: How long validating the inputs of one request may take, all its items together (a batch
#: of 1,000 shares it), before what is left is refused (422). See :func:`request_budget`.
VALIDATION_BUDGET_SEC = 0.5


def request_budget() -> AbstractContextManager[None]:
    """One validation budget for a whole request: every :func:`validate_input` on this thread
    inside it shares the same deadline. Services open it around a request's validations,
    which run before its transaction opens, so no budget is spent holding a connection."""
    return schema_regex.time_budget(VALIDATION_BUDGET_SEC)


def check_schema(schema: Any) -> dict[str, Any]:
    """``schema`` if it is a JSON object and a valid JSON Schema this service can run.

    A non-object is a malformed request (400 INVALID_REQUEST); an object that breaks its
    meta-schema, refers outside itself or uses a pattern RE2 cannot run is 422
    INVALID_SCHEMA with the reason and location.
    """
    from jsonschema.exceptions import SchemaError

    if not isinstance(schema, dict):
        raise ValidationFailed("Field 'schema' must be an object.")
    validator_class = _validator_class(schema)
    try:
        validator_class.check_schema(
            schema, format_checker=schema_regex.format_checker(validator_class)
        )
    except SchemaError as exc:
        where = _where(exc.absolute_path)
        if isinstance(exc.cause, schema_regex.UnsupportedPattern):  # format: regex
            raise _unsupported(exc.cause, where) from exc
        raise InvalidSchema(f"Invalid JSON Schema at {where}: {exc.message}") from exc
    _check_patterns_and_refs(schema, validator_class)
    return schema


def validate_input(schema: Mapping[str, Any] | None, value: Any) -> None:
    """Check job input against the endpoint's payload spec; 422 listing every violation.

    The message names each violation by its JSON path (``$.user.id: ...``), sorted by path
    and then by message so it is stable across runs. A stored schema that can no longer
    run here (written before refs and patterns were checked at creation) is 422
    INVALID_SCHEMA, never a 500.
    """
    if schema is None:
        return
    from referencing.exceptions import Unresolvable  # ~100 ms: imported on use

    if schema_regex.budget_spent():
        raise InputValidationFailed(
            f"Input not validated: the request's validation budget ({VALIDATION_BUDGET_SEC:g} s"
            " for all its items) was spent on the items before it; send fewer or cheaper items."
        )
    validator = _compiled(_cache_key(schema))
    try:
        with schema_regex.time_budget(VALIDATION_BUDGET_SEC):
            problems = sorted((e.json_path, e.message) for e in validator.iter_errors(value))
    except schema_regex.BudgetExceeded as exc:
        raise InputValidationFailed(
            f"Input could not be validated within the request's {VALIDATION_BUDGET_SEC:g} s "
            "validation budget: the input is too large for this payload spec (or the spec too "
            "costly); send less."
        ) from exc
    except RecursionError as exc:  # a ref cycle stored before cycles were refused
        raise InvalidSchema(
            "The endpoint's payload spec refers to itself without end; update it."
        ) from exc
    except Unresolvable as exc:
        raise InvalidSchema(
            f"The endpoint's payload spec has a $ref that does not resolve inside it "
            f"({exc}); update the payload spec."
        ) from exc
    except schema_regex.UnsupportedPattern as exc:
        raise _unsupported(exc, "the endpoint's payload spec") from exc
    if problems:
        listed = "; ".join(f"{path}: {message}" for path, message in problems)
        raise InputValidationFailed(
            f"Input does not match the payload spec ({len(problems)} violations): {listed}."
        )


def _validator_class(schema: Mapping[str, Any]) -> Any:
    from jsonschema import Draft202012Validator
    from jsonschema.validators import validator_for

    declared = schema.get("$schema")
    if declared is not None and not isinstance(declared, str):
        raise InvalidSchema("'$schema' must be a string naming a JSON Schema meta-schema.")
    validator_class = validator_for(schema, default=None if declared else Draft202012Validator)
    if validator_class is None:
        raise InvalidSchema(f"Unknown meta-schema in '$schema': {declared!r}.")
    return validator_class


def _cache_key(schema: Mapping[str, Any]) -> str:
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


@functools.lru_cache(maxsize=256)
def _compiled(key: str) -> Any:
    """The validator for one schema (by content), with RE2 regexes and no retrieval."""
    from referencing import Registry

    schema = json.loads(key)
    validator_class = _validator_class(schema)
    regex_class = schema_regex.extend_validator(validator_class)
    # An empty Registry never retrieves: jsonschema adds only the bundled meta-schemas.
    return regex_class(
        schema,
        registry=Registry(),
        format_checker=schema_regex.format_checker(validator_class),
    )


def _check_patterns_and_refs(schema: dict[str, Any], validator_class: Any) -> None:
    validator = _compiled(_cache_key(schema))
    cycles = _CycleCheck()
    for path, node, resolver in _subschemas(schema, validator._resolver, validator_class):
        _check_refs(path, node, resolver)
        for pattern, where in _patterns(node, path):
            try:
                schema_regex.compile_pattern(pattern)
            except schema_regex.UnsupportedPattern as exc:
                raise _unsupported(exc, where) from exc
        cycles.visit(node, resolver, path)


def _check_refs(path: tuple[Any, ...], node: dict[str, Any], resolver: Any) -> None:
    from referencing.exceptions import Unresolvable

    for keyword in _REF_KEYWORDS:
        ref = node.get(keyword)
        if not isinstance(ref, str):
            continue
        try:
            resolver.lookup(ref)
        except Unresolvable as exc:
            raise InvalidSchema(
                f"$ref {ref!r} at {_where(path)} does not resolve inside the schema: "
                "a payload spec may refer only to its own definitions ($defs, JSON "
                "pointers, embedded $id) or the standard meta-schemas; nothing is fetched."
            ) from exc


#: Longest chain of subschemas applied to one instance (refs, allOf/anyOf/oneOf, not,
#: if/then/else): a chain of 8,000 refs is no cycle, but following it recursed past
#: Python's stack (a 500); validation would recurse as deep. Real schemas nest a few levels.
MAX_IN_PLACE_DEPTH = 64


class _CycleCheck:
    """Refuses refs that lead back to a schema without applying to a deeper instance part,
    and chains of in-place subschemas longer than :data:`MAX_IN_PLACE_DEPTH`.

    ``{"$ref": "#"}`` or ``allOf`` of a ref to itself recurse for ever on any input; a ref
    through ``properties``/``items`` (a tree) is fine and not followed here.
    """

    def __init__(self) -> None:
        self._open: set[int] = set()
        self._done: set[int] = set()

    def _enter(self, node: dict[str, Any], path: tuple[Any, ...]) -> None:
        """Open ``node`` on the current chain, unless that closes a cycle or is too deep."""
        if id(node) in self._open:
            raise InvalidSchema(
                f"$ref at {_where(path)} leads back to a schema it came from without "
                "going deeper into the input: validation would never end."
            )
        if len(self._open) >= MAX_IN_PLACE_DEPTH:
            raise InvalidSchema(
                f"Subschemas chain more than {MAX_IN_PLACE_DEPTH} levels deep from "
                f"{_where(path[:3])} ($ref, allOf, anyOf, oneOf, not, if/then/else applied "
                "to one value)."
            )
        self._open.add(id(node))

    def visit(self, node: Any, resolver: Any, path: tuple[Any, ...]) -> None:
        if not isinstance(node, dict) or id(node) in self._done:
            return
        from referencing.exceptions import Unresolvable

        self._enter(node, path)
        for keyword in _REF_KEYWORDS:
            if isinstance(node.get(keyword), str):
                try:
                    resolved = resolver.lookup(node[keyword])
                except Unresolvable:
                    continue  # reported where that node is checked (_check_refs)
                self.visit(resolved.contents, resolved.resolver, (*path, keyword))
        for keyword in _IN_PLACE_LISTS:
            for index, sub in enumerate(_as_list(node.get(keyword))):
                self.visit(sub, resolver, (*path, keyword, index))
        for keyword in _IN_PLACE_ONE:
            self.visit(node.get(keyword), resolver, (*path, keyword))
        dependent = node.get("dependentSchemas")
        for name, sub in dependent.items() if isinstance(dependent, dict) else ():
            self.visit(sub, resolver, (*path, "dependentSchemas", name))
        self._open.discard(id(node))
        self._done.add(id(node))


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _subschemas(
    node: Any, resolver: Any, validator_class: Any, path: tuple[Any, ...] = ()
) -> Iterator[tuple[tuple[Any, ...], dict[str, Any], Any]]:
    """Every object in the schema outside data keywords, with the resolver in scope there."""
    if isinstance(node, list):
        for index, item in enumerate(node):
            yield from _subschemas(item, resolver, validator_class, (*path, index))
        return
    if not isinstance(node, dict):
        return
    if path and isinstance(node.get("$id"), str):
        from referencing.jsonschema import DRAFT202012, specification_with

        dialect = validator_class.META_SCHEMA.get("$schema", "")
        specification = specification_with(dialect, default=DRAFT202012)
        resolver = resolver.in_subresource(specification.create_resource(node))
    yield path, node, resolver
    for key, value in node.items():
        if key in _DATA_KEYWORDS:
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            for name, sub in value.items():
                yield from _subschemas(sub, resolver, validator_class, (*path, key, name))
        else:
            yield from _subschemas(value, resolver, validator_class, (*path, key))


def _patterns(node: Mapping[str, Any], path: tuple[Any, ...]) -> Iterator[tuple[str, str]]:
    if isinstance(node.get("pattern"), str):
        yield node["pattern"], _where((*path, "pattern"))
    properties = node.get("patternProperties")
    if isinstance(properties, dict):
        for pattern in properties:
            yield pattern, _where((*path, "patternProperties"))


def _unsupported(exc: schema_regex.UnsupportedPattern, where: str) -> InvalidSchema:
    return InvalidSchema(
        f"Pattern {exc.pattern!r} at {where} cannot be used: {exc.reason}. Patterns run on "
        "RE2, a linear-time engine (no backreferences or lookaround)."
    )


def _where(path: Any) -> str:
    return "/".join(str(part) for part in path) or "(root)"
