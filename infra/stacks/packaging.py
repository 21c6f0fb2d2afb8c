"""The Lambda package, slimmed: its shared objects without their symbol tables.

``chalice package`` zips the wheels as PyPI ships them, and some manylinux wheels carry
full symbol tables that only a debugger reads (cryptography's Rust extension alone:
14.3 MB, 11.5 MB stripped). ``strip --strip-unneeded`` removes them and keeps the dynamic
symbols the interpreter loads an extension by, as serverless-python-requirements' ``slim``
and Lambda layer builders do. The zip is rewritten entry by entry: every other file keeps
its bytes, name, date and permissions.

Both the deployed package (``stacks.task_executor.SlimChalice``, the CDK construct) and
``make bench-package`` (which measures what is deployed) go through
:func:`slim_deployment_zip`; this module imports nothing of the CDK, so the bench needs
only the standard library and binutils. Without ``strip`` on PATH (binutils) nothing is
changed and the result says so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SlimResult:
    """What :func:`slim_deployment_zip` did: sizes in bytes, before and after."""

    bytes_before: int
    bytes_after: int
    stripped: int  #: shared objects stripped
    skipped: str | None = None  #: why nothing was done, if so


def is_shared_object(name: str) -> bool:
    """``x.so`` and versioned ``x.so.1.2`` (a wheel's ``.libs`` may carry either)."""
    base = name.rsplit("/", 1)[-1]
    return base.endswith(".so") or ".so." in base


def _stripped(strip: str, data: bytes, scratch: Path) -> bytes:
    """``data`` after ``strip --strip-unneeded`` (the original if strip refuses it)."""
    target = scratch / "object.so"
    target.write_bytes(data)
    done = subprocess.run(  # noqa: S603 - binutils' strip on a file of our own
        [strip, "--strip-unneeded", str(target)], capture_output=True, check=False
    )
    return target.read_bytes() if done.returncode == 0 else data


#: Where binutils installs strip, looked at after PATH: a build whose PATH leaves out
#: /usr/bin (the CDK synthesis drops directories holding a system Node.js) still slims.
SYSTEM_BIN = os.pathsep.join(("/usr/bin", "/bin"))


def find_strip() -> str | None:
    """``strip`` on PATH, else in the system's bin directories; None without binutils."""
    return shutil.which("strip") or shutil.which("strip", path=SYSTEM_BIN)


def slim_deployment_zip(path: Path) -> SlimResult:
    """Rewrite the zip at ``path`` with its shared objects stripped (in place)."""
    before = path.stat().st_size
    strip = find_strip()
    if strip is None:
        print(f"warning: {path} not slimmed: no strip (binutils)", file=sys.stderr)
        return SlimResult(before, before, 0, skipped="no strip (binutils) on PATH")
    stripped = 0
    with tempfile.TemporaryDirectory(prefix="te-slim-") as tmp:
        scratch, rewritten = Path(tmp), Path(tmp) / "deployment.zip"
        with zipfile.ZipFile(path) as source, zipfile.ZipFile(rewritten, "w") as out:
            for info in source.infolist():
                data = source.read(info)
                if is_shared_object(info.filename):
                    slim = _stripped(strip, data, scratch)
                    stripped += len(slim) < len(data)
                    data = slim
                out.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED)
        os.replace(rewritten, path)
    return SlimResult(before, path.stat().st_size, stripped)
