"""The JSON Schema validator this service runs: jsonschema's, with every keyword linear and
under the request's budget (:mod:`.schema_budget`).

jsonschema's own keywords are right but some are not linear in one call, and a budget
checked between keywords cannot stop a keyword that runs for minutes:

* ``uniqueItems`` compares unsortable items (objects, arrays) pairwise: 6,000 distinct
  objects (77 KB) took 85 s. Here each item is reduced to a canonical key
  (:func:`item_key`) and the keys go into a set: linear, with checkpoints.
* ``enum`` and ``const`` compare with :func:`equal`, jsonschema's equality (``1 == 1.0``,
  ``true != 1``) with a checkpoint per container and every few elements.
* ``unevaluatedItems`` looked each index up in a list (quadratic); here in a set.
* the regex keywords run on RE2 (:mod:`.schema_regex`), with checkpoints in their loops.

:func:`extend_validator` installs them, checks the budget at every keyword and every
descent into a subschema, and keeps a subschema that declares another
dialect (``$schema``) on an extended class: jsonschema would switch to its own class for it,
with Python's backtracking regexes and no budget.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from chalicelib.domain import schema_regex
from chalicelib.domain.schema_budget import budgeted, checkpoint, paced
from chalicelib.domain.schema_regex import extras_message, short

Keyword = Callable[[Any, Any, Any, Mapping[str, Any]], Iterator[Any]]

# -- equality -----------------------------------------------------------------------------


def equal(one: Any, two: Any) -> bool:
    """JSON Schema equality, as jsonschema's ``_utils.equal``: numbers by value (``1`` equals
    ``1.0``), booleans only to themselves (``true`` is not ``1``), arrays in order, objects
    whatever their key order. A checkpoint at each container and every few elements."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, list) and isinstance(two, list):
        return _equal_arrays(one, two)
    if isinstance(one, dict) and isinstance(two, dict):
        return _equal_objects(one, two)
    if isinstance(one, bool) or isinstance(two, bool):
        return False  # the same boolean is the same object: caught by the first test
    return bool(one == two)


def _equal_arrays(one: list[Any], two: list[Any]) -> bool:
    """The same length and equal item by item, in order."""
    checkpoint()
    if len(one) != len(two):
        return False
    return all(equal(a, b) for a, b in paced(zip(one, two, strict=True)))


def _equal_objects(one: dict[str, Any], two: dict[str, Any]) -> bool:
    """The same keys, each with equal values, whatever their order."""
    checkpoint()
    return len(one) == len(two) and all(
        key in two and equal(value, two[key]) for key, value in paced(one.items())
    )


def item_key(value: Any) -> tuple[int, Any]:
    """A hashable key two values share exactly when :func:`equal` holds between them.

    Numbers and containers are keyed by text: ``int`` hashes are not randomized, so an
    input of numbers chosen to collide would turn a set into a quadratic list.
    """
    if isinstance(value, str):
        return (0, value)
    if value is None or isinstance(value, bool):
        return (1, value)
    if isinstance(value, int | float):
        return (2, json.dumps(_normal_number(value)))
    return (3, json.dumps(_normal(value), sort_keys=True, separators=(",", ":")))


def _normal_number(value: int | float) -> int | float:
    """``1.0`` as ``1``, so that equal numbers print alike (exact: ``int(float)`` is)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _normal(value: Any) -> Any:
    if isinstance(value, dict):
        checkpoint()
        return {key: _normal(item) for key, item in paced(value.items())}
    if isinstance(value, list):
        checkpoint()
        return [_normal(item) for item in paced(value)]
    if isinstance(value, float):
        return _normal_number(value)
    return value


def all_unique(items: list[Any]) -> bool:
    """No two of ``items`` are :func:`equal` (linear: keys in a set)."""
    seen: set[tuple[int, Any]] = set()
    for item in paced(items):
        key = item_key(item)
        if key in seen:
            return False
        seen.add(key)
    return True


# -- keyword implementations (signature: validator, keyword value, instance, schema) ------


def unique_items(validator: Any, unique: Any, instance: Any, schema: Mapping[str, Any]) -> Any:
    from jsonschema.exceptions import ValidationError

    if unique and validator.is_type(instance, "array") and not all_unique(instance):
        yield ValidationError(f"{short(instance)} has non-unique elements")


def enum(validator: Any, enums: Any, instance: Any, schema: Mapping[str, Any]) -> Any:
    from jsonschema.exceptions import ValidationError

    if not any(equal(each, instance) for each in paced(enums)):
        yield ValidationError(f"{short(instance)} is not one of {short(enums)}")


def const(validator: Any, value: Any, instance: Any, schema: Mapping[str, Any]) -> Any:
    from jsonschema.exceptions import ValidationError

    if not equal(instance, value):
        yield ValidationError(f"{short(value)} was expected")


def _unevaluated_items(find: Callable[[Any, Any, Any], list[int]]) -> Keyword:
    """``unevaluatedItems`` over ``find``, the draft's walk of the evaluated indexes."""

    def unevaluated_items(
        validator: Any, unevaluated: Any, instance: Any, schema: Mapping[str, Any]
    ) -> Iterator[Any]:
        from jsonschema.exceptions import ValidationError

        if not validator.is_type(instance, "array"):
            return
        evaluated = set(find(validator, instance, schema))
        extras = [item for index, item in enumerate(paced(instance)) if index not in evaluated]
        if extras:
            listed, verb = extras_message(extras)
            yield ValidationError(f"Unevaluated items are not allowed ({listed} {verb} unexpected)")

    return unevaluated_items


@functools.cache
def _replacements() -> dict[Keyword, Keyword]:
    """jsonschema's keyword functions -> ours, by identity (a draft keeps its own variant).

    The evaluated-index walks are jsonschema's own (pinned in requirements.txt; the parity
    tests in tests/unit/test_schema_keywords.py compare results).
    """
    from jsonschema import _keywords, _legacy_keywords, _utils

    return {
        _keywords.uniqueItems: unique_items,
        _keywords.enum: enum,
        _keywords.const: const,
        _keywords.unevaluatedItems: _unevaluated_items(
            _utils.find_evaluated_item_indexes_by_schema
        ),
        _legacy_keywords.unevaluatedItems_draft2019: _unevaluated_items(
            _legacy_keywords.find_evaluated_item_indexes_by_schema
        ),
    }


# -- the validator class ------------------------------------------------------------------

_EXTENDED: set[Any] = set()


@functools.cache
def extend_validator(validator_class: Any) -> Any:
    """``validator_class`` with this module's keywords and RE2's, the budget checked at
    every keyword and descent, and subschemas kept on extended classes
    (cached: one class per draft)."""
    from jsonschema import validators

    keywords = {
        name: _replacements().get(function, function)
        for name, function in validator_class.VALIDATORS.items()
    }
    keywords.update({n: f for n, f in schema_regex.KEYWORDS.items() if n in keywords})
    extended = validators.extend(validator_class, {n: budgeted(f) for n, f in keywords.items()})
    extended.descend = _budgeted_descend(extended.descend)
    extended.evolve = _staying_extended(extended.evolve)
    _EXTENDED.add(extended)
    return extended


def _budgeted_descend(descend: Callable[..., Any]) -> Callable[..., Any]:
    """``descend`` with a checkpoint into every subschema object: ``items: {}`` runs no
    keyword, yet each of 500,000 items costs a new validator (1.5 s). Into ``true`` and
    ``false`` it costs next to nothing and is not checked."""

    @functools.wraps(descend)
    def descend_budgeted(self: Any, instance: Any, schema: Any, *args: Any, **kw: Any) -> Any:
        if not isinstance(schema, bool):
            checkpoint()
        return descend(self, instance, schema, *args, **kw)

    return descend_budgeted


def _staying_extended(evolve: Callable[..., Any]) -> Callable[..., Any]:
    """jsonschema's ``evolve``, but a subschema that declares a dialect of its own
    (``$schema``) gets the extended class of that dialect, not jsonschema's plain one."""

    @functools.wraps(evolve)
    def evolve_extended(self: Any, **changes: Any) -> Any:
        evolved = evolve(self, **changes)
        plain: Any = type(evolved)
        if plain in _EXTENDED:
            return evolved
        import attrs

        ours = extend_validator(plain)
        fields = attrs.fields(plain)  # what jsonschema's evolve itself copies
        return ours(**{f.alias: getattr(evolved, f.name) for f in fields if f.init})

    return evolve_extended


@functools.cache
def meta_validator(validator_class: Any) -> Any:
    """The validator of ``validator_class``'s meta-schema, extended as above: checking a
    schema runs under the budget too (the draft-04 meta-schema's own ``uniqueItems`` over
    an ``enum`` of 2,000 objects took 6.6 s). It never retrieves anything: the meta-schemas
    are bundled."""
    from jsonschema.validators import validator_for
    from referencing import Registry

    meta_schema = validator_class.META_SCHEMA
    meta_class = extend_validator(validator_for(meta_schema, default=validator_class))
    return meta_class(
        meta_schema,
        registry=Registry(),
        format_checker=schema_regex.format_checker(validator_class),
    )
