"""JSON Schema's regular-expression keywords on RE2, a linear-time engine.

``jsonschema`` evaluates ``pattern``, ``patternProperties`` (also inside
``additionalProperties`` and ``unevaluatedProperties``) and ``format: regex`` with
Python's backtracking ``re``: ``"^(a+)+$"`` against 28 ``a`` and a ``!`` holds the
interpreter for 19 s, and an API client writes both the pattern and the input. RE2 matches
in time linear in the input for every pattern it accepts, so no schema and no input can
freeze a process. Why RE2 rather than a timeout: Python cannot interrupt ``re`` (it holds
the GIL, so a timeout thread never runs), a process per validation costs more than the
validation, and a timeout still burns its whole budget per request. The price: RE2 has no
backreferences or lookaround; payload specs that use them are refused at creation
(422 INVALID_SCHEMA naming the pattern) instead of being accepted and slow.

The keyword functions below replace jsonschema's own (same messages, same results, long
values shortened) and differ only in the engine, and in the checkpoints of the request's
budget inside their loops (:mod:`.schema_budget`: a schema of 300 patterns against an input
of 20,000 keys is 6 million searches);
:func:`~chalicelib.domain.schema_keywords.extend_validator` installs them.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from chalicelib.domain.schema_budget import checkpoint, paced

#: Instances longer than this are shortened in error messages (an input may be 1 MiB).
MESSAGE_INSTANCE_CHARS = 80
#: Extra keys or items an error message names; the others are counted.
MESSAGE_EXTRAS = 10


class UnsupportedPattern(ValueError):
    """A pattern RE2 cannot compile (syntax error, backreference, lookaround, too large)."""

    def __init__(self, pattern: str, reason: str) -> None:
        super().__init__(f"{pattern!r}: {reason}")
        self.pattern = pattern
        self.reason = reason


def compile_uncached(pattern: str) -> Any:
    """``pattern`` compiled by RE2; :class:`UnsupportedPattern` if it cannot be.

    For values of the input (``format: regex``): they must not fill the schema cache.
    """
    import re2  # imported on use: only requests that validate input pay for it

    options = re2.Options()
    options.log_errors = False  # RE2 would print every refused pattern to stderr
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "not a valid pattern"
        text = reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
        raise UnsupportedPattern(pattern, text) from None


#: A schema's patterns, compiled once (the schema's own text, never the input's).
compile_pattern = functools.lru_cache(maxsize=1024)(compile_uncached)


def search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches anywhere in ``text`` (JSON Schema's regex semantics).

    Checks the request's budget first: keys times patterns is the input's size times the
    schema's, and one keyword runs them all."""
    checkpoint()
    return compile_pattern(pattern).search(text) is not None


def short(instance: Any) -> str:
    """``repr(instance)``, cut to :data:`MESSAGE_INSTANCE_CHARS` for error messages."""
    text = repr(instance)
    if len(text) <= MESSAGE_INSTANCE_CHARS:
        return text
    return f"{text[:MESSAGE_INSTANCE_CHARS]}... ({len(text)} characters)"


def is_regex(instance: object) -> bool:
    """``format: regex``: a string RE2 compiles (raises UnsupportedPattern otherwise)."""
    if isinstance(instance, str):
        compile_uncached(instance)
    return True


# -- keyword implementations (signature: validator, keyword value, instance, schema) ------


def pattern(validator: Any, patrn: str, instance: Any, schema: Mapping[str, Any]) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and not search(patrn, instance):
        yield ValidationError(f"{short(instance)} does not match {patrn!r}")


def pattern_properties(
    validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Mapping[str, Any]
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for patrn, subschema in patterns.items():
        for key, value in paced(instance.items()):
            if search(patrn, key):
                yield from validator.descend(value, subschema, path=key, schema_path=patrn)


def _additional(instance: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    """Keys neither named by ``properties`` nor matched by ``patternProperties``."""
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    return [
        key
        for key in paced(instance)
        if key not in properties and not any(search(p, key) for p in patterns)
    ]


def listing(extras: Sequence[Any]) -> str:
    """``extras`` shortened and joined by commas: the first :data:`MESSAGE_EXTRAS`, then a
    count of the others (an input may have 100,000 extra keys)."""
    shown = ", ".join(short(extra) for extra in extras[:MESSAGE_EXTRAS])
    others = len(extras) - MESSAGE_EXTRAS
    return shown if others <= 0 else f"{shown} and {others} more"


def extras_message(extras: Sequence[Any]) -> tuple[str, str]:
    """(the extras listed, "was" or "were"): jsonschema's ``extras_msg``, bounded."""
    verb = "was" if len(extras) == 1 else "were"
    return listing(extras), verb


def additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    extras = set(_additional(instance, schema))
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            joined = listing(sorted(extras))
            patterns = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {patterns}")
        else:
            listed, verb = extras_message(sorted(extras, key=str))
            yield ValidationError(
                f"Additional properties are not allowed ({listed} {verb} unexpected)"
            )


def unevaluated_properties(
    validator: Any, unevaluated: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    evaluated = _evaluated_keys(validator, instance, schema)
    invalid = [
        key
        for key in paced(instance)
        if key not in evaluated
        and next(validator.descend(instance[key], unevaluated, path=key), None) is not None
    ]
    if not invalid:
        return
    if unevaluated is False:
        listed, verb = extras_message(sorted(invalid, key=str))
        yield ValidationError(
            f"Unevaluated properties are not allowed ({listed} {verb} unexpected)"
        )
    else:
        listed, verb = extras_message(invalid)
        yield ValidationError(
            "Unevaluated properties are not valid under the given schema "
            f"({listed} {verb} unevaluated and invalid)"
        )


def _valid(validator: Any, instance: Any, subschema: Any) -> bool:
    return next(validator.descend(instance, subschema), None) is None


def _evaluated_keys(validator: Any, instance: Mapping[str, Any], schema: Any) -> set[str]:
    """The keys of ``instance`` that ``schema`` evaluates (what unevaluatedProperties skips).

    The same walk as jsonschema's ``find_evaluated_property_keys_by_schema``, with RE2.
    """
    if not isinstance(schema, Mapping):
        return set()
    keys = _evaluated_through_refs(validator, instance, schema)
    keys |= _evaluated_by_properties(validator, instance, schema)
    keys |= _evaluated_in_place(validator, instance, schema)
    return keys | _evaluated_by_condition(validator, instance, schema)


def _evaluated_by_properties(
    validator: Any, instance: Mapping[str, Any], schema: Mapping[str, Any]
) -> set[str]:
    """Keys the object keywords evaluate: named, matched by a pattern, or the rest's schema."""
    keys: set[str] = set()
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        keys |= properties.keys() & instance.keys()
    for keyword in ("additionalProperties", "unevaluatedProperties"):
        if (subschema := schema.get(keyword)) is not None:
            keys |= {k for k, v in paced(instance.items()) if _valid(validator, v, subschema)}
    patterns = list(schema.get("patternProperties", {}))
    keys |= {k for k in paced(instance) if any(search(p, k) for p in patterns)}
    return keys


def _evaluated_in_place(
    validator: Any, instance: Mapping[str, Any], schema: Mapping[str, Any]
) -> set[str]:
    """Keys evaluated by the subschemas that apply to the whole object: those of
    ``dependentSchemas`` whose key is present, and the valid ones of allOf/oneOf/anyOf."""
    keys: set[str] = set()
    for key, subschema in schema.get("dependentSchemas", {}).items():
        if key in instance:
            keys |= _evaluated_keys(validator, instance, subschema)
    for keyword in ("allOf", "oneOf", "anyOf"):
        for subschema in schema.get(keyword, []):
            if _valid(validator, instance, subschema):
                keys |= _evaluated_keys(validator, instance, subschema)
    return keys


def _evaluated_through_refs(
    validator: Any, instance: Mapping[str, Any], schema: Mapping[str, Any]
) -> set[str]:
    keys: set[str] = set()
    for keyword in ("$ref", "$dynamicRef", "$recursiveRef"):
        ref = schema.get(keyword)
        if isinstance(ref, str):
            resolved = validator._resolver.lookup(ref)
            target = validator.evolve(schema=resolved.contents, _resolver=resolved.resolver)
            keys |= _evaluated_keys(target, instance, resolved.contents)
    return keys


def _evaluated_by_condition(
    validator: Any, instance: Mapping[str, Any], schema: Mapping[str, Any]
) -> set[str]:
    if "if" not in schema:
        return set()
    if validator.evolve(schema=schema["if"]).is_valid(instance):
        keys = _evaluated_keys(validator, instance, schema["if"])
        if "then" in schema:
            keys |= _evaluated_keys(validator, instance, schema["then"])
        return keys
    if "else" in schema:
        return _evaluated_keys(validator, instance, schema["else"])
    return set()


#: The keywords :func:`chalicelib.domain.schema_keywords.extend_validator` installs from here.
KEYWORDS = {
    "pattern": pattern,
    "patternProperties": pattern_properties,
    "additionalProperties": additional_properties,
    "unevaluatedProperties": unevaluated_properties,
}


@functools.cache
def format_checker(validator_class: Any) -> Any:
    """The class's format checker with ``regex`` checked by RE2 instead of ``re.compile``."""
    from jsonschema import FormatChecker

    checker = FormatChecker(())
    checker.checkers = dict(validator_class.FORMAT_CHECKER.checkers)  # a copy: not shared
    checker.checks("regex", raises=UnsupportedPattern)(is_regex)
    return checker
