"""The validator's keywords are linear and check the budget inside their loops (pure).

``uniqueItems`` compared unsortable items pairwise (6,000 objects: 85 s), ``unevaluatedItems``
looked indexes up in a list, and the budget was checked only when a keyword started, so one
keyword call ran as long as its input made it. Here: the same answers as jsonschema's, and
a clock that advances at each read shows where the budget is read.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from jsonschema import Draft7Validator, Draft201909Validator, Draft202012Validator
from jsonschema._utils import equal as jsonschema_equal
from jsonschema._utils import uniq as jsonschema_uniq

from chalicelib.domain import payload_specs, schema_keywords
from chalicelib.domain.schema_budget import BudgetExceeded, time_budget
from chalicelib.domain.schema_regex import UnsupportedPattern
from chalicelib.errors import InputValidationFailed

DRAFT7 = "http://json-schema.org/draft-07/schema#"

VALUES: list[Any] = [
    1,
    1.0,
    -0.0,
    0,
    True,
    False,
    None,
    "1",
    "",
    10**20,
    1e20,
    10**20 + 1,
    0.5,
    [],
    [1],
    [1.0],
    [True],
    {},
    {"a": 1},
    {"a": 1.0},
    {"a": True},
    {"b": 1, "a": [1, {"c": None}]},
    {"a": [1.0, {"c": None}], "b": 1.0},
    {"a": "1"},
]


def test_equality_and_keys_agree_with_jsonschema() -> None:
    for one, two in itertools.product(VALUES, repeat=2):
        expected = jsonschema_equal(one, two)
        assert schema_keywords.equal(one, two) == expected, (one, two)
        keys_match = schema_keywords.item_key(one) == schema_keywords.item_key(two)
        assert keys_match == expected, (one, two)
        assert schema_keywords.all_unique([one, two]) == jsonschema_uniq([one, two]), (one, two)


PARITY_CASES: list[tuple[dict[str, Any], Any]] = [
    ({"uniqueItems": True}, [1, 1.0]),
    ({"uniqueItems": True}, [1, True, "1", [1], {"a": 1}]),
    ({"uniqueItems": True}, [{"a": 1, "b": 2}, {"b": 2, "a": 1.0}]),
    ({"uniqueItems": False}, [1, 1]),
    ({"enum": [1, "a", {"b": [1]}]}, {"b": [1.0]}),
    ({"enum": [1, "a", {"b": [1]}]}, True),
    ({"enum": [[1, 2], None]}, [2, 1]),
    ({"const": {"a": [1, 2]}}, {"a": [1, 2.0]}),
    ({"const": 0}, False),
    ({"prefixItems": [True], "unevaluatedItems": False}, [1, 2, 3]),
    (
        {"prefixItems": [True], "contains": {"type": "string"}, "unevaluatedItems": False},
        [1, "s", 2],
    ),
    ({"items": True, "unevaluatedItems": False}, [1, 2]),
]


def _errors(validator: Any, instance: Any) -> list[tuple[str, str]]:
    return sorted((e.json_path, e.message) for e in validator.iter_errors(instance))


@pytest.mark.parametrize(("schema", "instance"), PARITY_CASES)
def test_linear_keywords_give_jsonschemas_results(schema: dict[str, Any], instance: Any) -> None:
    ours = schema_keywords.extend_validator(Draft202012Validator)(schema)
    assert _errors(ours, instance) == _errors(Draft202012Validator(schema), instance)


def test_draft_2019_unevaluated_items_keeps_its_own_rules() -> None:
    schema = {"items": [True], "additionalItems": False, "unevaluatedItems": False}
    ours = schema_keywords.extend_validator(Draft201909Validator)(schema)
    for instance in ([1], [1, 2], [1, 2, 3]):
        assert _errors(ours, instance) == _errors(Draft201909Validator(schema), instance)


@contextmanager
def clock_read_count(reads_allowed: int) -> Iterator[None]:
    """A budget on a clock that advances one second at each read: the work raises
    BudgetExceeded at its ``reads_allowed``-th read of the budget, however fast it runs."""
    ticks = itertools.count()
    with time_budget(reads_allowed, clock=lambda: float(next(ticks))):
        yield


@pytest.mark.parametrize(
    ("schema", "instance"),
    [
        # One keyword call each: only checks inside the call can stop it.
        ({"uniqueItems": True}, [{"n": n} for n in range(2000)]),
        ({"enum": [{"n": n} for n in range(2000)]}, {"n": -1}),
        ({"const": list(range(5000))}, list(range(5000))),
        ({"items": True, "unevaluatedItems": False}, list(range(5000))),
        ({"patternProperties": {"^x": {}}}, {f"k{n}": n for n in range(5000)}),
        # No keyword at all below the top: every descent into a subschema is a check.
        ({"items": {}}, list(range(5000))),
    ],
)
def test_one_keyword_call_cannot_outrun_the_budget(schema: dict[str, Any], instance: Any) -> None:
    validator = schema_keywords.extend_validator(Draft202012Validator)(schema)
    with clock_read_count(50), pytest.raises(BudgetExceeded):
        list(validator.iter_errors(instance))


def test_a_subschema_declaring_another_draft_stays_on_re2_and_the_budget() -> None:
    """jsonschema validates a subschema with ``$schema`` by that draft's own class: Python's
    backtracking ``re`` and no budget (``^(a+)+$`` on 28 ``a`` and a ``!``: 19 s)."""
    nested = {"$schema": DRAFT7, "pattern": "^(a)\\1$"}  # RE2 has no backreferences
    schema = {"properties": {"a": nested}}
    validator = schema_keywords.extend_validator(Draft202012Validator)(schema)
    assert type(validator.evolve(schema=nested)) is schema_keywords.extend_validator(
        Draft7Validator
    )
    with pytest.raises(UnsupportedPattern):
        list(validator.iter_errors({"a": "aa"}))


def test_a_422_lists_a_bounded_number_of_violations(monkeypatch: pytest.MonkeyPatch) -> None:
    # The listing is under test, not the budget: 10,000 items may take longer than 0.5 s of
    # wall time on a loaded machine.
    monkeypatch.setattr(payload_specs, "VALIDATION_BUDGET_SEC", 60.0)
    with pytest.raises(InputValidationFailed) as raised:
        payload_specs.validate_input({"items": {"type": "string"}}, list(range(10_000)))
    message = str(raised.value)
    assert "(10000 violations, the first 20 listed)" in message
    assert len(message) < 20 * (payload_specs.MAX_VIOLATION_CHARS + 20)
    with pytest.raises(InputValidationFailed) as raised:
        payload_specs.validate_input({"not": {}}, ["x" * 100] * 10_000)
    assert len(str(raised.value)) < 2 * payload_specs.MAX_VIOLATION_CHARS
