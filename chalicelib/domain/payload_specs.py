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
* **Every keyword is linear and under a time budget** (:mod:`.schema_keywords`,
  :mod:`.schema_budget`): job inputs share :data:`VALIDATION_BUDGET_SEC` per request, and
  checking a schema (its meta-schema included) has :data:`SCHEMA_CHECK_BUDGET_SEC`.

The validator for a schema is compiled once and cached by the schema's content, so each
version of a payload spec is compiled once per process, not once per request.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Any

from chalicelib.domain import schema_keywords, schema_regex
from chalicelib.domain.schema_budget import BudgetExceeded, budget_spent, checkpoint, time_budget
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
#: How long checking one payload spec may take (POST/PUT /payload-specs): its meta-schema,
#: its refs, patterns and cycles. Larger than an input's: a spec is checked once, when it
#: is written, and jsonschema's draft 2020-12 meta-schema costs about 4 us per byte of
#: schema here (a 400 KB spec of 5,000 properties: 1.5 s).
SCHEMA_CHECK_BUDGET_SEC = 2.0
#: Violations a 422 lists (the first by path; it counts them all), and the longest text it
#: shows of each: an input of 100,000 wrong items has 100,000 violations.
MAX_LISTED_VIOLATIONS = 20
MAX_VIOLATION_CHARS = 300


def request_budget() -> AbstractContextManager[None]:
    """One validation budget for a whole request: every :func:`validate_input` on this thread
    inside it shares the same deadline. Services open it around a request's validations,
    which run before its transaction opens, so no budget is spent holding a connection."""
    return time_budget(VALIDATION_BUDGET_SEC)


def check_schema(schema: Any) -> dict[str, Any]:
    """``schema`` if it is a JSON object and a valid JSON Schema this service can run.

    A non-object is a malformed request (400 INVALID_REQUEST); an object that breaks its
    meta-schema, refers outside itself, uses a pattern RE2 cannot run or cannot be checked
    within :data:`SCHEMA_CHECK_BUDGET_SEC` is 422 INVALID_SCHEMA with the reason and
    location.
    """
    if not isinstance(schema, dict):
        raise ValidationFailed("Field 'schema' must be an object.")
    validator_class = _validator_class(schema)
    meta = schema_keywords.meta_validator(validator_class)
    try:
        with time_budget(SCHEMA_CHECK_BUDGET_SEC):
            # The first violation, as jsonschema's own check_schema reports it.
            error = next(meta.iter_errors(schema), None)
            if error is None:
                _check_patterns_and_refs(schema, validator_class)
    except BudgetExceeded as exc:
        raise InvalidSchema(
            f"The schema could not be checked within {SCHEMA_CHECK_BUDGET_SEC:g} s: it is too "
            "large or too costly; send a smaller one."
        ) from exc
    if error is not None:
        where = _where(error.absolute_path)
        if isinstance(error.cause, schema_regex.UnsupportedPattern):  # format: regex
            raise _unsupported(error.cause, where)
        raise InvalidSchema(f"Invalid JSON Schema at {where}: {_short_message(error.message)}")
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

    if budget_spent():
        raise InputValidationFailed(
            f"Input not validated: the request's validation budget ({VALIDATION_BUDGET_SEC:g} s"
            " for all its items) was spent on the items before it; send fewer or cheaper items."
        )
    validator = _compiled(_cache_key(schema))
    try:
        with time_budget(VALIDATION_BUDGET_SEC):
            problems = sorted((e.json_path, e.message) for e in validator.iter_errors(value))
    except BudgetExceeded as exc:
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
        raise InputValidationFailed(_violations(problems))


def _violations(problems: list[tuple[str, str]]) -> str:
    """The 422's message: how many violations, the first :data:`MAX_LISTED_VIOLATIONS`."""
    shown = problems[:MAX_LISTED_VIOLATIONS]
    listed = "; ".join(f"{path}: {_short_message(message)}" for path, message in shown)
    count = f"{len(problems)} violations"
    if len(problems) > len(shown):
        count += f", the first {len(shown)} listed"
    return f"Input does not match the payload spec ({count}): {listed}."


def _short_message(message: str) -> str:
    """``message``, cut to :data:`MAX_VIOLATION_CHARS` (jsonschema's messages quote the
    value, which may be the whole input)."""
    if len(message) <= MAX_VIOLATION_CHARS:
        return message
    return f"{message[:MAX_VIOLATION_CHARS]}... ({len(message)} characters)"


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
    regex_class = schema_keywords.extend_validator(validator_class)
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
    checkpoint()  # a spec may be 1 MiB of subschemas: the walk runs under its check's budget
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
