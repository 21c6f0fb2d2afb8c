"""``pip install .`` gives a working client: pyproject.toml packages te/ alone and declares
every third-party distribution te/ imports (read from its source, nothing installed)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))

#: Import name -> the distribution that provides it, where the two differ.
DISTRIBUTION_OF = {"yaml": "pyyaml"}


def top_level_imports(package: Path) -> dict[str, str]:
    """Every absolute module imported anywhere in ``package`` (function bodies included):
    its top-level name -> one file that imports it."""
    found: dict[str, str] = {}
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                found.setdefault(name.split(".")[0], str(path.relative_to(package.parent)))
    return found


def declared() -> set[str]:
    """The distributions ``[project] dependencies`` names (normalised, no versions)."""
    names = set()
    for requirement in PYPROJECT["project"].get("dependencies", []):
        match = re.match(r"[A-Za-z0-9._-]+", requirement)
        assert match, requirement
        names.add(re.sub(r"[-_.]+", "-", match.group(0)).lower())
    return names


def third_party(imports: dict[str, str]) -> dict[str, str]:
    return {
        name: where
        for name, where in imports.items()
        if name not in sys.stdlib_module_names and name not in ("te", "__future__")
    }


def test_every_third_party_import_of_the_client_is_a_declared_dependency() -> None:
    needed = third_party(top_level_imports(ROOT / "te"))
    assert needed, "te/ imports click, urllib3 and yaml"
    missing = {
        name: where
        for name, where in needed.items()
        if DISTRIBUTION_OF.get(name, name).lower() not in declared()
    }
    assert missing == {}, f"add to [project] dependencies in pyproject.toml: {missing}"


def test_the_client_does_not_import_the_service() -> None:
    """chalicelib is not in the distribution: te/ must reach the service over HTTP only."""
    assert "chalicelib" not in top_level_imports(ROOT / "te")


def test_the_distribution_holds_the_client_packages_only() -> None:
    include = PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    assert include == ["te", "te.*"]
    assert PYPROJECT["project"]["scripts"] == {"te": "te.cli:main"}


def test_the_check_sees_an_undeclared_import(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "m.py").write_text("import json\n\ndef f():\n    import requests.adapters\n")
    imports = top_level_imports(package)
    assert set(third_party(imports)) == {"requests"}
    assert "requests" not in declared()
