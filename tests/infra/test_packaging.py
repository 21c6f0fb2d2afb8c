"""The deployed Lambda package is slimmed: shared objects stripped, everything else as is.

Run on a real wheel's extension (rpds-py's, unstripped as PyPI ships it), which must
still import after stripping, and on the package the CDK synthesis deployed.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import rpds

from tests.support.infra import REPO_ROOT, Synthesis

sys.path.insert(0, str(REPO_ROOT / "infra"))
from stacks import packaging
from stacks.packaging import is_shared_object, slim_deployment_zip

RPDS_DIR = Path(rpds.__file__).parent
SCRIPT = "bin/run.py"


def _strips_further(data: bytes, tmp_path: Path) -> bool:
    """Whether ``strip --strip-unneeded`` would still make this shared object smaller."""
    target = tmp_path / "probe.so"
    target.write_bytes(data)
    subprocess.run(["strip", "--strip-unneeded", str(target)], check=True)
    smaller = target.stat().st_size < len(data)
    target.unlink()
    return smaller


def _package(path: Path) -> None:
    """A deployment.zip with rpds (its extension unstripped) and an executable script."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in sorted(RPDS_DIR.iterdir()):
            if file.is_file():
                archive.write(file, f"rpds/{file.name}")
        script = zipfile.ZipInfo(SCRIPT, date_time=(2026, 1, 2, 3, 4, 6))
        script.external_attr = 0o100755 << 16
        archive.writestr(script, "print('hello')\n")


def test_shared_objects_are_stripped_and_still_import(tmp_path: Path) -> None:
    package = tmp_path / "deployment.zip"
    _package(package)
    with zipfile.ZipFile(package) as archive:
        before = {i.filename: (i, archive.read(i)) for i in archive.infolist()}
    extension = next(name for name in before if is_shared_object(name))
    assert _strips_further(before[extension][1], tmp_path)

    result = slim_deployment_zip(package)

    assert result.skipped is None and result.stripped == 1
    assert result.bytes_after < result.bytes_before
    with zipfile.ZipFile(package) as archive:
        after = {i.filename: (i, archive.read(i)) for i in archive.infolist()}
        archive.extractall(tmp_path / "tree")
    assert list(after) == list(before)
    assert len(after[extension][1]) < len(before[extension][1])
    assert not _strips_further(after[extension][1], tmp_path)
    for name, (info, data) in before.items():
        if name != extension:
            assert after[name][1] == data
        assert after[name][0].external_attr == info.external_attr
        assert after[name][0].date_time == info.date_time
    tree = str(tmp_path / "tree")
    probe = (
        f"import sys; sys.path.insert(0, {tree!r}); "
        "import rpds; print(rpds.HashTrieMap({'a': 1})['a'])"
    )
    imported = subprocess.run(
        [sys.executable, "-I", "-S", "-c", probe],
        capture_output=True,
        text=True,
        check=False,
    )
    assert imported.returncode == 0 and imported.stdout.strip() == "1", imported.stderr


def test_without_strip_nothing_changes_and_the_result_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "deployment.zip"
    _package(package)
    original = package.read_bytes()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(packaging, "SYSTEM_BIN", str(tmp_path / "empty"))

    result = slim_deployment_zip(package)

    assert result.skipped == "no strip (binutils) on PATH" and result.stripped == 0
    assert package.read_bytes() == original


@pytest.mark.parametrize(
    ("name", "shared"),
    [
        ("cryptography/hazmat/bindings/_rust.abi3.so", True),
        ("_re2.cpython-311-x86_64-linux-gnu.so", True),
        ("pkg.libs/libfoo-1a2b.so.1.2.3", True),
        ("tzdata/zoneinfo/Europe/Paris", False),
        ("notes/so/readme.txt", False),
        ("module.sol", False),
    ],
)
def test_which_files_are_shared_objects(name: str, shared: bool) -> None:
    assert is_shared_object(name) is shared


def test_the_synthesized_stack_deploys_the_slimmed_package(
    synthesis: Synthesis, tmp_path: Path
) -> None:
    """chalice.cdk writes its package under the synthesis's working directory."""
    packages = list((synthesis.outdir.parent / "chalice.out").glob("*/deployment.zip"))
    assert len(packages) == 1, packages
    with zipfile.ZipFile(packages[0]) as archive:
        shared = [i for i in archive.infolist() if is_shared_object(i.filename)]
        assert shared, "the package carries no extension: is it the app's?"
        for info in shared:
            assert not _strips_further(archive.read(info), tmp_path), info.filename
