"""The payload-spec validator: RE2 keywords agree with jsonschema's, compiled once a schema."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from jsonschema import Draft7Validator, Draft202012Validator

from chalicelib.domain import payload_specs, schema_keywords, schema_regex
from chalicelib.domain.payload_specs import validate_input
from chalicelib.errors import InputValidationFailed, InvalidSchema

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
    ours = schema_keywords.extend_validator(Draft202012Validator)(schema)
    assert _errors(ours, instance) == _errors(Draft202012Validator(schema), instance)


def test_older_drafts_use_re2_too() -> None:
    ours = schema_keywords.extend_validator(Draft7Validator)
    assert ours.VALIDATORS["pattern"].__wrapped__ is schema_regex.pattern
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


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#"},
        {"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
        {
            "$defs": {"a": {"allOf": [{"$ref": "#/$defs/b"}]}, "b": {"not": {"$ref": "#/$defs/a"}}},
            "properties": {"x": {"$ref": "#/$defs/a"}},
        },
        {"properties": {"x": {"anyOf": [{"type": "string"}, {"$ref": "#/properties/x"}]}}},
    ],
)
def test_refs_that_loop_without_consuming_input_are_refused(schema: dict[str, Any]) -> None:
    with pytest.raises(InvalidSchema, match="would never end"):
        payload_specs.check_schema(schema)


def test_recursive_schemas_over_deeper_input_are_fine() -> None:
    tree = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
            }
        },
        "$ref": "#/$defs/node",
    }
    payload_specs.check_schema(tree)
    validate_input(tree, {"kids": [{"kids": []}, {"kids": [{"kids": []}]}]})


def test_a_stored_looping_schema_is_a_422_not_a_500() -> None:
    with pytest.raises(InvalidSchema, match="refers to itself"):
        validate_input({"$ref": "#"}, {})


def test_names_of_properties_are_not_mistaken_for_data_keywords() -> None:
    """A property called "const" holds a schema: its refs and patterns are checked."""
    with pytest.raises(InvalidSchema, match="does not resolve"):
        payload_specs.check_schema({"properties": {"const": {"$ref": "#/$defs/missing"}}})
    with pytest.raises(InvalidSchema, match="RE2"):
        payload_specs.check_schema({"properties": {"enum": {"pattern": "(a)\\1"}}})
    payload_specs.check_schema({"properties": {"x": {"const": {"$ref": "not-a-ref"}}}})


def test_work_a_schema_multiplies_is_cut_off_by_the_budget() -> None:
    """Nested allOf of two refs doubles the work per level: 2^22 evaluations per value."""
    defs = {f"l{n}": {"allOf": [{"$ref": f"#/$defs/l{n + 1}"}] * 2} for n in range(22)}
    defs["l22"] = {"type": "string"}
    schema = {"$defs": defs, "$ref": "#/$defs/l0"}
    payload_specs.check_schema(schema)
    # The budget (0.5 s) ends it, as its message says; the 30 s wait only guards a hang.
    with ThreadPoolExecutor(1) as pool:
        validating = pool.submit(validate_input, schema, "x")
        with pytest.raises(InputValidationFailed, match="could not be validated within"):
            validating.result(timeout=30)


def test_many_patterns_against_many_keys_are_bounded_too() -> None:
    patterns = {f"^k{n}_(a+)+$": {"type": "string"} for n in range(50)}
    schema = {"type": "object", "patternProperties": patterns, "additionalProperties": False}
    payload_specs.check_schema(schema)
    keys = {f"key{n}": 1 for n in range(100_000)}
    with pytest.raises(InputValidationFailed):
        validate_input(schema, keys)


def test_format_regex_inputs_do_not_fill_the_schema_pattern_cache() -> None:
    schema = {"type": "string", "format": "regex"}
    before = schema_regex.compile_pattern.cache_info().currsize
    for n in range(20):
        validate_input(schema, f"^input{n}$")
    with pytest.raises(InputValidationFailed):
        validate_input(schema, "(a)\\1")
    assert schema_regex.compile_pattern.cache_info().currsize == before
