"""The README's and the tutorial's shell and Python blocks, run against a live stack.

``make run``'s stack (``python -m chalicelib.local``, the embedded PostgreSQL) on a free
loopback port, and the target the pages tell the reader to start (``python3 -m http.server``)
on another. The blocks run as a reader runs them (tests/support/doc_blocks.py): in a
directory whose ``.te-data`` is the stack's data and whose ``.venv`` is this one, the pages'
``http://localhost:8080`` and ``localhost:9999`` replaced by those two ports on 127.0.0.1.
The README and then the tutorial on the same data; the tutorial alone on a fresh data
directory. A block that fails (an HTTP error status included) fails the test, named.

The blocks left out are exactly the marked ones, and they are pinned here: marking a block
``<!-- not run: ... -->`` to silence a failure means changing this list too.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.acceptance.test_local_stack import Stack, _postgres_processes
from tests.support.doc_blocks import (
    SHELL_OR_PYTHON_ALIASES,
    Block,
    BlockFailed,
    fenced_blocks,
    run_blocks,
    runnable_blocks,
)
from tests.support.served import HttpTarget, Reply, die_with_parent, free_port, wait_for_port
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("README.md", "docs/tutorial.md")
#: (page, the block's first line) of every block that is not run, and why it cannot be.
NOT_RUN = {
    ("README.md", "make run    # sets everything up, runs API + worker + scheduler on an"): (
        "make run and make test themselves: the test starts the same stack"
    ),
    ("README.md", "python3 -m http.server 9999 --bind 127.0.0.1"): "the target, started here",
    ("docs/tutorial.md", "make run"): "make run itself",
    ("docs/tutorial.md", "python3 -m http.server 9999 --bind 127.0.0.1"): "the target",
}
TARGET_COMMAND = "python3 -m http.server 9999 --bind 127.0.0.1"


def page_blocks(page: str) -> list[Block]:
    return runnable_blocks(page, (ROOT / page).read_text(encoding="utf-8"))


def _first_line(block: Block) -> str:
    return next(ln for ln in block.code.splitlines() if ln.strip())[:70].rstrip()


class Reader:
    """A terminal beside a running stack and the pages' target: runs a page's blocks."""

    def __init__(self, stack: Stack, target_port: int, home: Path) -> None:
        home.mkdir()
        (home / ".te-data").symlink_to(stack.data_dir)
        (home / ".venv").symlink_to(Path(sys.prefix))
        self.home = home
        self.replace = {
            "http://localhost:8080": stack.base,
            "localhost:9999": f"127.0.0.1:{target_port}",
        }
        env = {k: v for k, v in os.environ.items() if not k.startswith("TE_")}
        self.env = {**env, "HOME": str(home)}  # no ~/.config/te of the machine's user

    def on_loopback(self, block: Block) -> Block:
        code = block.code
        for page_value, here in self.replace.items():
            code = code.replace(page_value, here)
        hosts = set(re.findall(r"://([^/:\s'\"]+)", code)) | set(re.findall(r"localhost", code))
        assert hosts <= {"127.0.0.1"}, f"{block.name} reaches {hosts - {'127.0.0.1'}}"
        return Block(page=block.page, line=block.line, lang=block.lang, code=code)

    def run(self, page: str) -> list[str]:
        blocks = [self.on_loopback(b) for b in page_blocks(page) if b.not_run is None]
        return run_blocks(blocks, cwd=self.home, env=self.env, timeout=55)


@pytest.fixture
def target() -> Iterator[int]:
    """The target the pages start: Python's http.server (it answers 501 to a POST)."""
    port = free_port()
    command = TARGET_COMMAND.replace("python3", sys.executable).replace("9999", str(port))
    proc = subprocess.Popen(
        command.split(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=die_with_parent,  # not left serving if the session is killed
    )
    try:
        wait_for_port(port, proc)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A fresh data directory outside pytest's temporary root: a pytest session that starts
    meanwhile sets that root back to 0700, and the embedded PostgreSQL's OS user (as root)
    could no longer reach its files."""
    parent = Path(tempfile.mkdtemp(prefix="te-docs-blocks-"))
    os.chmod(parent, 0o755)  # noqa: S103 - the embedded postgres OS user must reach it
    yield parent / "data"
    shutil.rmtree(parent)


def _stack(data_dir: Path) -> Stack:
    return Stack(data_dir, free_port())


def _stop(stack: Stack) -> None:
    assert stack.stop() == 0
    wait_for(
        lambda: _postgres_processes(stack.data_dir),
        "postgres to exit",
        until=lambda found: not found,
    )


def _tutorial_claims_hold(outputs: list[str]) -> None:
    """What the tutorial's comments say its batch answers: the third item is refused."""
    batches = [
        json.loads(line)
        for out in outputs
        for line in out.splitlines()
        if line.startswith("{") and '"batch_id"' in line and '"items"' in line
    ]
    assert batches, "the tutorial's batch was not printed"
    assert [item["status"] for item in batches[0]["items"]] == [201, 201, 422]


def test_the_readme_then_the_tutorial_run_on_the_same_data(
    tmp_path: Path, data_dir: Path, target: int
) -> None:
    stack = _stack(data_dir)
    try:
        readme = Reader(stack, target, tmp_path / "readme-reader")
        readme.run("README.md")
        tutorial = Reader(stack, target, tmp_path / "tutorial-reader")
        _tutorial_claims_hold(tutorial.run("docs/tutorial.md"))
    finally:
        _stop(stack)


def test_the_tutorial_runs_on_a_fresh_data_directory(
    tmp_path: Path, data_dir: Path, target: int
) -> None:
    stack = _stack(data_dir)
    try:
        _tutorial_claims_hold(Reader(stack, target, tmp_path / "reader").run("docs/tutorial.md"))
    finally:
        _stop(stack)


def test_the_blocks_left_out_are_exactly_the_pinned_ones() -> None:
    marked = {
        (b.page, _first_line(b)): b.not_run
        for page in PAGES
        for b in page_blocks(page)
        if b.not_run is not None
    }
    assert set(marked) == set(NOT_RUN)
    runnable = [b for page in PAGES for b in page_blocks(page) if b.not_run is None]
    assert {b.page for b in runnable} == set(PAGES)
    assert {b.lang for b in runnable} == {"sh", "python"}
    for page in PAGES:
        text = (ROOT / page).read_text(encoding="utf-8")
        assert TARGET_COMMAND in text  # the target this test starts is the pages' own
        langs = {b.lang for b in fenced_blocks(page, text)}
        assert not langs & set(SHELL_OR_PYTHON_ALIASES), f"{page}: say sh or python"


def test_a_failing_block_is_named(tmp_path: Path, http_target: HttpTarget) -> None:
    http_target.script("/conflict", Reply(409, '{"error": {"code": "CONFLICT"}}'))
    page = (
        "# A page\n\n```sh\nN=1\n```\n\n<!-- not run: a server -->\n```sh\nsleep 600\n```\n"
        f"```sh\ncurl -s {http_target.url('/ok')}\n"
        f"curl -s -X POST {http_target.url('/conflict')}\necho never\n```\n"
    )
    blocks = runnable_blocks("page.md", page)
    assert [b.not_run for b in blocks] == [None, "a server", None]
    env = {"PATH": os.environ["PATH"]}
    with pytest.raises(BlockFailed) as failed:
        run_blocks([b for b in blocks if not b.not_run], cwd=tmp_path, env=env, timeout=20)
    assert failed.value.block.line == 11
    assert "page.md:11 (curl -s" in str(failed.value) and "HTTP 409" in str(failed.value)
    assert "never" not in failed.value.output

    python = runnable_blocks("page.md", "```python\nraise SystemExit(4)\n```\n")
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    with pytest.raises(BlockFailed, match=r"page.md:1 \(raise SystemExit\(4\)\) failed \(exit"):
        run_blocks(python, cwd=tmp_path, env=env, timeout=20)
