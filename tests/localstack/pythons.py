"""The Python LocalStack runs on: the newest CPython >= 3.12 this machine has.

LocalStack 2026.3 needs Python 3.12+ (it fails on 3.11, the project's own). Looked for in
pyenv's installed versions (``$PYENV_ROOT/versions/*/bin/python3``), then ``python3.14``,
``python3.13``, ``python3.12`` and ``python3`` on PATH; each candidate is asked for its
version and whether it can make a venv. ``make localstack`` runs this file: it prints the
interpreter's path, or says why there is none and exits 1. Standard library only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

MINIMUM = (3, 12)
ON_PATH = ("python3.14", "python3.13", "python3.12", "python3")
_PROBE = "import sys, venv, ensurepip; print(sys.implementation.name, *sys.version_info[:3])"


@dataclass(frozen=True, order=True)
class Interpreter:
    """One Python found, ordered by version."""

    version: tuple[int, int, int]
    path: str


def candidates(env: dict[str, str] | None = None) -> list[str]:
    """Paths worth asking: pyenv's versions, then the names on PATH (no duplicates)."""
    env = dict(os.environ) if env is None else env
    root = Path(env.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    found = sorted(str(p) for p in root.glob("*/bin/python3")) if root.is_dir() else []
    for name in ON_PATH:
        path = shutil.which(name, path=env.get("PATH", ""))
        if path:
            found.append(path)
    return list(dict.fromkeys(found))


def probe(path: str) -> Interpreter | None:
    """The CPython at ``path`` with venv and ensurepip, or None."""
    try:
        done = subprocess.run(
            [path, "-c", _PROBE], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    fields = done.stdout.split()
    if done.returncode != 0 or len(fields) != 4 or fields[0] != "cpython":
        return None
    major, minor, micro = (int(part) for part in fields[1:])
    return Interpreter((major, minor, micro), str(Path(path).resolve()))


def newest(minimum: tuple[int, int] = MINIMUM) -> Interpreter | None:
    """The newest interpreter at or above ``minimum``."""
    found = [i for i in map(probe, candidates()) if i is not None and i.version >= minimum]
    return max(found, default=None)


def why_none(minimum: tuple[int, int] = MINIMUM) -> str:
    """The sentence a skip (and ``make localstack``) gives when there is no interpreter."""
    wanted = ".".join(map(str, minimum))
    return (
        f"no Python >= {wanted} on this machine (LocalStack 2026.3 needs it; looked in "
        f"pyenv's versions and for {', '.join(ON_PATH)} on PATH)"
    )


def main() -> int:
    found = newest()
    if found is None:
        print(why_none())
        return 1
    print(found.path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
