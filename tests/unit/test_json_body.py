"""parse_json_body: what the database cannot store is a 400 whichever way JSON spells it,
and depth is bounded, with or without the string walk (api/http.py _inspect)."""

from __future__ import annotations

import json

import pytest

from chalicelib.api.http import MAX_JSON_DEPTH, parse_json_body
from chalicelib.errors import InvalidRequest


def parse(text: str) -> dict[str, object]:
    return parse_json_body(text.encode(), max_bytes=10_000_000)


@pytest.mark.parametrize(
    "text",
    [
        r'{"a": "\u0000"}',
        r'{"\u0000": 1}',
        r'{"a": ["x", {"b": "\ud800"}]}',  # lone high surrogate, nested
        r'{"a": "\uDC00"}',  # lone low surrogate, upper-case hex
        r'{"a": "\udfff tail"}',
    ],
)
def test_unstorable_strings_are_a_400(text: str) -> None:
    with pytest.raises(InvalidRequest, match="NUL"):
        parse(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r'{"a": "\ud83d\ude00"}', {"a": "\U0001f600"}),  # a pair is one character
        (r'{"a": "\\u0000"}', {"a": "\\u0000"}),  # an escaped backslash, then text
        (r'{"a": "\u00e9"}', {"a": "é"}),
        ('{"a": "é"}', {"a": "é"}),
        # numbers, null and booleans beside a pair: the string walk passes over them
        (r'{"a": [1, null, true, 2.5, "\ud83d\ude00"]}', {"a": [1, None, True, 2.5, "\U0001f600"]}),
    ],
)
def test_storable_strings_pass(text: str, expected: dict[str, object]) -> None:
    assert parse(text) == expected


@pytest.mark.parametrize("risky", ["", r"\ud83d\ude00"])
def test_depth_is_bounded_with_and_without_the_string_walk(risky: str) -> None:
    deep: object = "x" + risky
    for _ in range(MAX_JSON_DEPTH):
        deep = {"k": [deep]}
    text = json.dumps({"a": deep}, ensure_ascii=False).replace("\\\\", "\\")
    with pytest.raises(InvalidRequest, match="nesting"):
        parse(text)
    shallow = {"jobs": [{"input": {"n": i, "s": "x"}} for i in range(1000)]}
    assert parse(json.dumps(shallow)) == shallow


@pytest.mark.parametrize(
    "literal", ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1.5e309", "[1, 2e999]"]
)
def test_non_finite_numbers_are_a_400_naming_the_problem(literal: str) -> None:
    with pytest.raises(InvalidRequest, match="numbers must be finite") as caught:
        parse(f'{{"a": {{"b": {literal}}}}}')
    assert caught.value.status == 400 and caught.value.code == "INVALID_REQUEST"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1.7976931348623157e308}', {"a": 1.7976931348623157e308}),  # the largest double
        ('{"a": -1e-400}', {"a": -0.0}),  # underflow is finite
        ('{"a": 1' + "0" * 400 + "}", {"a": 10**400}),  # an integer literal stays exact
        ('{"a": "NaN", "b": "Infinity"}', {"a": "NaN", "b": "Infinity"}),  # strings are data
    ],
)
def test_finite_numbers_and_lookalike_strings_pass(text: str, expected: object) -> None:
    assert parse(text) == expected
