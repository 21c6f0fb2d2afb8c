"""What a host process needs to stand in for a Lambda runtime: its Python and its packages.

* :func:`find_python`: the interpreter whose version the runtime names (``python3.11`` ->
  a CPython 3.11) at its newest patch release here, as AWS keeps a runtime at its newest:
  pyenv's installed versions (``PYENV_ROOT``) and ``python3.11`` on PATH (pyenv's shims
  left out: they pick a version by other rules). Debian's 3.11.2, say, would load code
  that an older patch needs and AWS's 3.11 does not (redis-py's ``async_timeout``).
* :func:`runtime_packages_dir`: a directory of links to boto3 and its dependencies, which
  AWS's Python runtimes carry and a deployment package leaves out; taken from the Python
  this runs in (LocalStack's). Pure-Python packages, so any 3.x runs them.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

#: What AWS's Python runtimes provide besides the standard library (import names).
RUNTIME_PACKAGES = ("boto3", "botocore", "jmespath", "s3transfer", "dateutil", "six", "urllib3")
_RUNTIME = re.compile(r"^python(?P<version>3\.\d+)$")


def runtime_version(runtime: str) -> str | None:
    """``python3.11`` -> ``3.11``; None for a runtime that is not CPython."""
    match = _RUNTIME.match(runtime or "")
    return match["version"] if match else None


def _patch_level(path: Path) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", path.name))


def pyenv_candidates(version: str, pyenv_root: Path) -> list[Path]:
    """``<root>/versions/<version>.*/bin/python<version>``, newest patch first."""
    versions = pyenv_root / "versions"
    if not versions.is_dir():
        return []
    found = [
        entry / "bin" / f"python{version}"
        for entry in versions.iterdir()
        if re.fullmatch(rf"{re.escape(version)}\.\d+", entry.name)
    ]
    found = [path for path in found if path.is_file()]
    return sorted(found, key=lambda path: _patch_level(path.parents[1]), reverse=True)


def path_without_shims(path: str) -> str:
    """PATH without pyenv's shims directory."""
    return os.pathsep.join(d for d in path.split(os.pathsep) if d and "/.pyenv/shims" not in d)


def patch_version(python: str) -> tuple[int, ...] | None:
    """``python``'s full version (3, 11, 7), or None when it does not run."""
    try:
        done = subprocess.run(
            [python, "-I", "-S", "-c", "import sys; print(*sys.version_info[:3])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    fields = done.stdout.split()
    return tuple(int(part) for part in fields) if done.returncode == 0 and fields else None


@functools.cache
def _newest(version: str, pyenv_root: str, path: str) -> str | None:
    found = [str(p) for p in pyenv_candidates(version, Path(pyenv_root))]
    on_path = shutil.which(f"python{version}", path=path_without_shims(path))
    if on_path:
        found.append(on_path)
    versions = {python: patch_version(python) for python in found}
    running = [python for python, full in versions.items() if full]
    return max(running, key=lambda python: versions[python] or (), default=None)


def find_python(runtime: str, env: Mapping[str, str] | None = None) -> str | None:
    """The newest interpreter of ``runtime``'s version (its newest patch release, as AWS
    runs), or None when this machine has none."""
    version = runtime_version(runtime)
    if version is None:
        return None
    env = os.environ if env is None else env
    pyenv_root = env.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    return _newest(version, pyenv_root, env.get("PATH", ""))


def runtime_packages_dir(target: Path, packages: Iterable[str] = RUNTIME_PACKAGES) -> Path:
    """``target`` holding a link to each of ``packages`` as this interpreter finds them."""
    target.mkdir(parents=True, exist_ok=True)
    for name in packages:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise RuntimeError(f"{name} is not installed beside LocalStack (the runtime needs it)")
        origin = Path(spec.origin)
        source = origin.parent if origin.name == "__init__.py" else origin
        link = target / source.name
        if not link.exists():
            link.symlink_to(source)
    return target
