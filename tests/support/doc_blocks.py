"""The fenced ```sh and ```python blocks of a Markdown page, and one shell that runs them.

A reader types a page's blocks into one terminal, top to bottom: variables, functions and
``export``s of one block are there for the next, and a Python block runs in
``.venv/bin/python`` with that terminal's environment. :func:`run_blocks` does the same in one
``bash`` process, with ``set -eo pipefail`` and a ``curl`` that fails on an HTTP status of
400 or more (the page's own ``curl -s`` would print the error and carry on), and fails naming
the block that stopped (page, line, first line).

A block a test cannot run (one that starts a long-running server, say) has the comment
``<!-- not run: why -->`` as the last non-blank line before its fence; it is kept, with its
reason, and skipped. Blocks of any other language (a diagram) are not runnable and are not
returned.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

RUNNABLE = ("sh", "python")
#: Fence languages a reader would take for a shell or Python block: a page must say ``sh`` or
#: ``python``, so that no such block escapes the run under another name.
SHELL_OR_PYTHON_ALIASES = ("bash", "shell", "console", "zsh", "py", "python3", "pycon")
NOT_RUN = re.compile(r"^<!--\s*not run:\s*(.+?)\s*-->$")
FENCE = re.compile(r"^```\s*([\w+-]*)\s*$")


@dataclass(frozen=True, kw_only=True)
class Block:
    """One fenced block: where it is, its language and code, and why it is not run (if so)."""

    page: str
    line: int  # of the opening fence, from 1
    lang: str
    code: str
    not_run: str | None = None

    @property
    def name(self) -> str:
        first = next((ln for ln in self.code.splitlines() if ln.strip()), "")
        return f"{self.page}:{self.line} ({first.strip()[:70]})"


def fenced_blocks(page: str, text: str) -> list[Block]:
    """Every fenced block of ``text`` (any language), in order."""
    found: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), None)
        if end is None:
            raise ValueError(f"{page}:{i + 1}: a fence that is never closed")
        before = next((ln.strip() for ln in reversed(lines[:i]) if ln.strip()), "")
        marker = NOT_RUN.match(before)
        found.append(
            Block(
                page=page,
                line=i + 1,
                lang=opening.group(1),
                code="\n".join(lines[i + 1 : end]) + "\n",
                not_run=marker.group(1) if marker else None,
            )
        )
        i = end + 1
    return found


def runnable_blocks(page: str, text: str) -> list[Block]:
    """The ```sh and ```python blocks, the marked ones included (with their reason)."""
    return [b for b in fenced_blocks(page, text) if b.lang in RUNNABLE]


class BlockFailed(AssertionError):
    """A block stopped: ``block`` names it, ``output`` is what the shell printed."""

    def __init__(self, block: Block, status: int, output: str) -> None:
        tail = "\n".join(output.splitlines()[-40:])
        super().__init__(f"{block.name} failed (exit status {status}):\n{tail}")
        self.block = block
        self.output = output


#: Before the page's blocks: stop at the first failing command, and a curl that fails on an
#: HTTP error status (the last status line of its headers; a redirect's is not the last).
PRELUDE = r"""set -eo pipefail
curl() {
  local headers status rc
  headers=$(mktemp)
  command curl -D "$headers" "$@" || {
    rc=$?; rm -f "$headers"; echo "curl failed: $rc" >&2; return "$rc"
  }
  status=$(awk '/^HTTP\//{s=$2} END{print s}' "$headers"); rm -f "$headers"
  if [ "${status:-0}" -ge 400 ]; then echo "HTTP $status from: curl $*" >&2; return 22; fi
}
"""


def _script(blocks: list[Block], progress: Path) -> str:
    parts = [PRELUDE]
    for i, block in enumerate(blocks):
        parts.append(f"echo '::block {i}::'; echo \"start {i} $(date +%s.%N)\" >> '{progress}'\n")
        if block.lang == "sh":
            parts.append(block.code)
        else:
            parts.append(f".venv/bin/python - <<'__DOC_PYTHON__'\n{block.code}__DOC_PYTHON__\n")
        parts.append(f"echo \"end {i} $(date +%s.%N)\" >> '{progress}'\n")
    return "".join(parts)


def run_blocks(
    blocks: list[Block], *, cwd: Path, env: dict[str, str], timeout: float = 50
) -> list[str]:
    """Run ``blocks`` (none marked not run) in one bash in ``cwd``: each block's output.

    Raises :class:`BlockFailed` naming the first block that failed (or was still running
    when ``timeout`` ran out).
    """
    assert all(b.not_run is None for b in blocks), "marked blocks are the caller's to drop"
    progress = cwd / ".doc-blocks-progress"
    progress.write_text("")
    script = cwd / ".doc-blocks.sh"
    script.write_text(_script(blocks, progress))
    try:
        done = subprocess.run(
            ["bash", str(script)],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        status, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        status = -1
        output = _text(exc.stdout) + _text(exc.stderr) + f"\n(still running after {timeout} s)"
    if status != 0:
        started = [ln.split()[1] for ln in progress.read_text().splitlines() if ln[:5] == "start"]
        failed = blocks[int(started[-1])] if started else blocks[0]
        raise BlockFailed(failed, status, output)
    return re.split(r"^::block \d+::\n", done.stdout, flags=re.M)[1:]


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode(errors="replace")
