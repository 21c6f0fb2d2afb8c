"""The import-linter contracts in pyproject.toml hold, and each of them can fail.

``make test`` runs ``lint-imports`` over the tree (the lint step). These tests show the
contracts are not stubs: in a copy of the package, adding the one import a contract
forbids makes that contract break, and the report names the offending import.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

#: contract id -> (module of the copy to edit, the import added to it, how the report shows it)
VIOLATIONS = {
    "errors-root": (
        "chalicelib/errors.py",
        "from chalicelib import settings",
        "chalicelib.errors -> chalicelib.settings",
    ),
    "domain-pure": (
        "chalicelib/domain/cron.py",
        "from chalicelib import logs",
        "chalicelib.domain.cron -> chalicelib.logs",
    ),
    "db-adapter": (
        "chalicelib/db/notify.py",
        "from chalicelib.settings import get_settings",
        "chalicelib.db.notify -> chalicelib.settings",
    ),
    "services-below-api": (
        "chalicelib/services/executions.py",
        "from chalicelib.api.pagination import parse_page",
        "chalicelib.services.executions -> chalicelib.api.pagination",
    ),
    "loops-not-scheduler": (
        "chalicelib/health/heartbeat.py",
        "from chalicelib.scheduler.names import HOUSEKEEPER",
        "chalicelib.health.heartbeat -> chalicelib.scheduler.names",
    ),
    # A stage sending SQL itself instead of through the worker's store.
    "worker-port": (
        "chalicelib/worker/leases.py",
        "from chalicelib.db.queries import queries",
        "chalicelib.worker.leases -> chalicelib.db.queries",
    ),
    # The composition root building the test store into the deployed worker.
    "memory-store-for-tests": (
        "chalicelib/wiring/worker.py",
        "from chalicelib.worker.memory import InMemoryStore",
        "chalicelib.wiring.worker -> chalicelib.worker.memory",
    ),
    # A service reaching for the composition root instead of taking its collaborators.
    "root-at-entry-points": (
        "chalicelib/services/configs.py",
        "from chalicelib.wiring.process import ProcessRoot",
        "chalicelib.services.configs -> chalicelib.wiring.process",
    ),
    # The old app <-> local cycle: the local server took the app from app.py.
    "app-is-top": (
        "chalicelib/local/server.py",
        "import app",
        "chalicelib.local.server -> app",
    ),
    # The CLI reaching into the service instead of going over HTTP.
    "client-apart": (
        "te/cli/keys.py",
        "from chalicelib.services.api_keys import ApiKeyService",
        "te.cli.keys -> chalicelib.services.api_keys",
    ),
    # The migrate <-> wiring cycle: db sits below wiring in the stack.
    "stack": (
        "chalicelib/db/migrate.py",
        "from chalicelib import wiring",
        "chalicelib.db.migrate -> chalicelib.wiring",
    ),
}


def lint_imports(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def copy_of_the_package(target: Path) -> Path:
    for package in ("chalicelib", "te"):
        shutil.copytree(
            ROOT / package, target / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(ROOT / "pyproject.toml", target / "pyproject.toml")
    return target


def test_the_tree_keeps_every_contract() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Contracts: {len(VIOLATIONS)} kept, 0 broken." in result.stdout


def test_every_contract_is_exercised_here() -> None:
    declared = {
        line.split('"')[1]
        for line in (ROOT / "pyproject.toml").read_text().splitlines()
        if line.startswith("id = ")
    }
    assert declared == set(VIOLATIONS)


@pytest.mark.parametrize("contract", sorted(VIOLATIONS))
def test_a_forbidden_import_breaks_its_contract(contract: str, tmp_path: Path) -> None:
    module, line, shown = VIOLATIONS[contract]
    copy = copy_of_the_package(tmp_path)
    clean = lint_imports(copy, "--contract", contract)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    with (copy / module).open("a") as source:
        source.write(f"\n{line}  # added by the test\n")

    broken = lint_imports(copy, "--contract", contract)

    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "0 kept, 1 broken." in broken.stdout
    assert shown in broken.stdout
