"""The payload-spec validator: RE2 keywords agree with jsonschema's, compiled once a schema."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from jsonschema import Draft7Validator, Draft202012Validator

from chalicelib.domain import payload_specs, schema_regex
from chalicelib.domain.payload_specs import validate_input
from chalicelib.errors import InputValidationFailed

PARITY_CASES: list[tuple[dict[str, Any], Any]] = [
    ({"pattern": "^[a-z]+\\d{2}$"}, "abc12"),
    ({"pattern": "^[a-z]+\\d{2}$"}, "abc1"),
    ({"patternProperties": {"^x-": {"type": "integer"}}}, {"x-a": 1, "x-b": "no", "y": 1}),
    (
        {"properties": {"id": {}}, "patternProperties": {"^x-": {}}, "additionalProperties": False},
        {"id": 1, "x-a": 1, "other": 2, "more": 3},
    ),
    ({"properties": {"id": {}}, "additionalProperties": False}, {"id": 1, "z": 2}),
    ({"additionalProperties": {"type": "string"}}, {"a": "s", "b": 2}),
    (
        {
            "allOf": [{"properties": {"a": True}}],
            "patternProperties": {"^p": True},
            "if": {"required": ["a"]},
            "then": {"properties": {"t": True}},
            "else": {"properties": {"e": True}},
            "dependentSchemas": {"a": {"properties": {"d": True}}},
            "unevaluatedProperties": False,
        },
        {"a": 1, "p1": 1, "t": 1, "d": 1, "e": 1, "zz": 1},
    ),
    (
        {
            "$defs": {"b": {"properties": {"r": True}}},
            "$ref": "#/$defs/b",
            "unevaluatedProperties": {"type": "integer"},
        },
        {"r": "x", "n": 1, "s": "bad"},
    ),
]


def _errors(validator: Any, instance: Any) -> list[tuple[str, str]]:
    return sorted((e.json_path, e.message) for e in validator.iter_errors(instance))


@pytest.mark.parametrize(("schema", "instance"), PARITY_CASES)
def test_re2_keywords_give_jsonschemas_results(schema: dict[str, Any], instance: Any) -> None:
    ours = schema_regex.extend_validator(Draft202012Validator)(schema)
    assert _errors(ours, instance) == _errors(Draft202012Validator(schema), instance)


def test_older_drafts_use_re2_too() -> None:
    ours = schema_regex.extend_validator(Draft7Validator)
    assert ours.VALIDATORS["pattern"] is schema_regex.pattern
    assert "unevaluatedProperties" not in ours.VALIDATORS
    assert _errors(ours({"pattern": "^a"}), "b") == _errors(Draft7Validator({"pattern": "^a"}), "b")


def test_a_schema_is_compiled_once_not_per_request() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 7}}}
    before = payload_specs._compiled.cache_info()
    for n in range(7, 12):
        validate_input(dict(schema), {"n": n})
    with pytest.raises(InputValidationFailed):
        validate_input(dict(schema), {"n": 1})
    after = payload_specs._compiled.cache_info()
    assert after.misses - before.misses == 1
    assert after.hits - before.hits == 5


def test_long_inputs_are_shortened_in_messages() -> None:
    with pytest.raises(InputValidationFailed) as raised:
        validate_input({"pattern": "^b"}, "a" * 100_000)
    assert len(str(raised.value)) < 400
    assert "100002 characters" in str(raised.value)


def test_the_worst_pattern_on_a_large_input_completes_in_a_child_process() -> None:
    """Guarded by the child's timeout: on Python's re this input would run for days."""
    code = (
        "from chalicelib.domain.payload_specs import validate_input\n"
        "from chalicelib.errors import InputValidationFailed\n"
        "s = {'properties': {'a': {'pattern': '^(a+)+$'}, 'b': {'pattern': '^(a|a)*$'}}}\n"
        "try:\n"
        "    validate_input(s, {'a': 'a' * 500_000 + '!', 'b': 'a' * 500_000 + '!'})\n"
        "except InputValidationFailed as exc:\n"
        "    print('violations' in str(exc))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "True"
