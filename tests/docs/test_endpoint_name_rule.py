"""The endpoint reference states the name rule the API applies: its pattern, and its
examples accepted and refused as it says (the page is generated from
``chalicelib/domain/names.py``; this reads the page a reader reads)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from chalicelib.domain.names import check_endpoint_name
from chalicelib.errors import ValidationFailed

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "endpoints.md"

#: Names that probe each part of a rule: case, `_`, hyphens, length, other characters.
PROBES = [
    "a",
    "billing-webhook",
    "Billing",
    "billing_webhook",
    "a--b",
    "-a",
    "a-",
    "x" * 100,
    "x" * 101,
    "a.b",
    "a b",
    "ünï",
    "9",
]


def _name_row() -> str:
    rows = [
        line
        for line in PAGE.read_text(encoding="utf-8").splitlines()
        if line.startswith("| `name` |")
    ]
    assert len(rows) == 1, "the reference has one row for the endpoint's name"
    return rows[0]


def _accepted(name: str) -> bool:
    try:
        check_endpoint_name(name)
    except ValidationFailed:
        return False
    return True


def test_documented_pattern_is_the_one_applied() -> None:
    patterns = re.findall(r"`(\^[^`]+\$)`", _name_row())
    assert len(patterns) == 1, "the name row states the pattern names must match"
    documented = re.compile(patterns[0])
    for name in PROBES:
        by_docs = len(name) <= 100 and documented.fullmatch(name) is not None
        assert by_docs == _accepted(name), name


@pytest.mark.parametrize("part", ["e.g.", "not"])
def test_documented_examples_are_accepted_and_refused_as_said(part: str) -> None:
    row = _name_row()
    after = row.split("; not ", 1) if part == "not" else row.split(" e.g. ", 1)
    assert len(after) == 2, f"the name row gives examples after {part!r}"
    examples = re.findall(r"`([^`]+)`", after[1].split(";", 1)[0])
    assert examples
    for name in examples:
        assert _accepted(name) == (part == "e.g."), name


def test_no_uppercase_or_underscore_claimed() -> None:
    row = _name_row().lower()
    assert "uppercase" not in row
    assert "`_`" not in row
