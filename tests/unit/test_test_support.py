"""Tests share helpers through tests/support/, never through a conftest, and move one
clock (tests/support/clock.py).

A conftest is pytest's: it holds fixtures and hooks, and pytest imports it by its own
rules (a package's conftest as ``tests.x.conftest``, a directory without ``__init__.py``
as a top-level ``conftest``), so a test module that imports one may get a second copy of
it, with its own module state. What tests import lives in a module of tests/support/.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _python_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [ROOT / name for name in listed if (ROOT / name).is_file()]


def conftest_imports(source: str) -> list[str]:
    """The modules named ``conftest`` (or ``….conftest``) that ``source`` imports."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
            if node.module in (None, "") or (node.module or "").endswith("tests"):
                names += [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found += [n for n in names if n.split(".")[-1] == "conftest"]
    return found


def test_the_check_sees_every_form_of_import() -> None:
    assert conftest_imports("from tests.conftest import ApiClient") == ["tests.conftest"]
    assert conftest_imports("def f():\n    from conftest import X\n") == ["conftest"]
    assert conftest_imports("import tests.integration.worker.conftest as c") == [
        "tests.integration.worker.conftest"
    ]
    assert conftest_imports("from tests import conftest") == ["conftest"]
    assert conftest_imports("from . import conftest") == ["conftest"]
    assert conftest_imports("from tests.support.api_client import ApiClient") == []


def test_no_module_imports_a_conftest() -> None:
    offenders = {
        str(path.relative_to(ROOT)): imported
        for path in _python_files()
        if (imported := conftest_imports(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}, "import these helpers from a module of tests/support/ instead"


def clock_classes(source: str) -> list[str]:
    """Classes of ``source`` named as a clock or fake time is (``FakeClock``, ``_Clock``,
    ``FakeTime``)."""
    return [
        node.name
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ClassDef)
        and re.fullmatch(r"_?(Fake|Manual)?(Clock|Time)", node.name)
    ]


def test_tests_move_one_clock() -> None:
    assert clock_classes("class FakeClock:\n    pass\nclass _Clock: ...\nclass FakeTime: ...") == [
        "FakeClock",
        "_Clock",
        "FakeTime",
    ]
    own = ROOT / "tests" / "support" / "clock.py"
    copies = {
        str(path.relative_to(ROOT)): names
        for path in _python_files()
        if path.parts[len(ROOT.parts)] == "tests" and path != own
        if (names := clock_classes(path.read_text(encoding="utf-8")))
    }
    assert copies == {}, "move time with tests.support.clock.FakeClock"
