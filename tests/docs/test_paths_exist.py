"""Every repository path that code, SQL, Makefiles or docs name exists.

A path is a run of directory names ending in a file with a known extension
(``chalicelib/worker/worker.py``, ``migrations/001_initial.sql``) or in ``/`` (``tests/support/``),
whose first directory is one of the repository's: a top-level one, or one directly under
``chalicelib/``, ``tests/``, ``bench/`` or ``docs/`` (so ``worker/pipeline.py`` is read as
the text means it). It is resolved against the repository root, the citing file's own
directory, ``chalicelib/`` and ``tests/``, in that order, and must be a tracked file or
directory there, or be ignored by git (what a run writes, such as ``bench/results/quick/``).
Recorded output (``bench/results/``) and test fixtures are data, not text that points;
a ``.gitignore`` names what is not tracked.
"""

from __future__ import annotations

import os
import re
import subprocess
from functools import cache
from pathlib import PurePosixPath

from tests.docs.test_no_ticket_references import REPO_ROOT, tracked_texts

EXTENSIONS = "py|sql|md|sh|toml|yml|yaml|json|mk|js|css|html|txt|cfg|ini|nix|png"
#: A path: optional ./ or ../ steps, then directories, then a file name or a final "/".
PATH = re.compile(
    rf"(?<![\w./@:$-])((?:\.\.?/)*(?:[A-Za-z_][\w.-]*/)+(?:[\w.-]*\.(?:{EXTENSIONS})\b|(?![\w.*<{{…-])))"
)
#: Directories that hold what a path names relative to them.
BASES = ("", "chalicelib/", "tests/")
#: What is data (recorded runs, fixtures), not prose that points somewhere.
#: A .gitignore names what is not tracked, by design.
DATA = re.compile(r"^(bench/results/|tests/fixtures/)|(^|/)\.gitignore$")


@cache
def _tracked() -> tuple[frozenset[str], frozenset[str]]:
    files = frozenset(tracked_texts()) | frozenset(
        subprocess.run(
            ["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True
        ).stdout.split()
    )
    dirs = {str(parent) for name in files for parent in PurePosixPath(name).parents}
    return files, frozenset(dirs - {"."})


def _first_dirs() -> frozenset[str]:
    """Directory names a path may start with: top-level ones, and those one level below
    chalicelib/, tests/, bench/ and docs/."""
    _, dirs = _tracked()
    tops = {d for d in dirs if "/" not in d}
    below = {
        d.split("/", 1)[1]
        for d in dirs
        if d.count("/") == 1 and d.split("/")[0] in ("chalicelib", "tests", "bench", "docs")
    }
    return frozenset(tops | below | {".", ".."})


def _ignored(path: str) -> bool:
    return (
        subprocess.run(
            ["git", "check-ignore", "-q", "--no-index", path], cwd=REPO_ROOT, check=False
        ).returncode
        == 0
    )


def named_paths(text: str) -> list[tuple[int, str]]:
    """(line, path) for each repository-looking path ``text`` names."""
    starts = _first_dirs()
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in PATH.finditer(line):
            token = match.group(1)
            if token.split("/")[0] in starts:
                found.append((number, token))
    return found


def resolves(token: str, citing: str) -> bool:
    files, dirs = _tracked()
    here = str(PurePosixPath(citing).parent)
    for base in ("", f"{here}/" if here != "." else "", *BASES[1:]):
        candidate = os.path.normpath(base + token).removeprefix("./")
        if candidate in files or candidate in dirs or token.rstrip("/") == "":
            return True
    slash = "/" if token.endswith("/") else ""
    return any(_ignored(os.path.normpath(base + token) + slash) for base in BASES)


def missing_paths() -> dict[str, list[str]]:
    missing: dict[str, list[str]] = {}
    for name, text in tracked_texts().items():
        if DATA.search(name):
            continue
        for number, token in named_paths(text):
            if not resolves(token, name):
                missing.setdefault(name, []).append(f"{number}: {token}")
    return missing


def test_the_path_pattern_reads_paths_as_written() -> None:
    text = (
        "see chalicelib/worker/worker.py, `worker/pipeline.py` and tests/support/;\n"
        "not https://example.com/a/b.py, a.b.c, 50/s or chalicelib/*.py"
    )
    assert named_paths(text) == [
        (1, "chalicelib/worker/worker.py"),
        (1, "worker/pipeline.py"),
        (1, "tests/support/"),
    ]


def test_a_stale_pointer_is_found() -> None:
    assert resolves("worker/pipeline.py", "docs/explanation/design.md")
    assert resolves("../../docs/explanation/design.md", "tests/docs/test_paths_exist.py")
    assert resolves("support/netguard.py", "docs/explanation/design.md")
    # Joined at run time, so this file names no missing path itself.
    assert not resolves("/".join(("chalicelib", "wiring.py")), "chalicelib/db/sql/worker.sql")
    assert not resolves("/".join(("worker", "poller.py")), "bench/README.md")
    assert resolves("bench/results/quick/", "bench/run.py")  # what a run writes: ignored


def test_every_named_path_exists() -> None:
    assert missing_paths() == {}
