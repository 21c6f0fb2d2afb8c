"""``te`` on inputs that used to break it: ``te batch create``
splits by request size, not only by line count, reports what committed when a request
fails, and refuses a line too large to send; ``te keys`` needs the API only (it used to need
the database, and exited with a traceback without it)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from te.client import MAX_BODY_BYTES, encode_body
from tests.integration.cli.test_cli import endpoint
from tests.support.cli import Te
from tests.support.served import HttpTarget, free_port

ROOT = Path(__file__).resolve().parents[3]


def job(key: str, size: int = 10) -> dict[str, object]:
    """A job request whose input holds ``size`` bytes of text."""
    return {
        "endpoint": "hook",
        "trigger": "DELAYED",
        "run_at": "2099-01-01T00:00:00Z",
        "idempotency_key": key,
        "input": {"text": "x" * size},
    }


def jsonl(te: Te, jobs: list[dict[str, object]]) -> str:
    return te.file("jobs.jsonl", "".join(json.dumps(j) + "\n" for j in jobs))


def test_batch_create_splits_requests_by_size_under_the_body_limit(
    te: Te, http_target: HttpTarget
) -> None:
    endpoint(te, http_target)
    jobs = [job(f"big{n}", size=400_000) for n in range(3)]  # 1.2 MB in all, 3 lines
    assert len(encode_body({"jobs": jobs})) > MAX_BODY_BYTES

    result = te("batch", "create", jsonl(te, jobs), "--json")

    # The old te sent the 3 lines in one request, over the limit: 413, nothing created.
    assert result.exit_code == 0, (result.stdout, result.stderr)
    summary = json.loads(result.stdout)
    assert (summary["created"], summary["refused"]) == (3, [])
    totals = [te.json("batch", "get", b)["total"] for b in summary["batches"]]
    assert totals == [2, 1]  # two lines fit in 1 MiB, the third went in a second request


@pytest.mark.parametrize("options", [{}, {"atomic": True, "on_complete": "done-hook"}])
def test_each_request_is_filled_up_to_the_byte_limit_and_no_further(
    options: dict[str, object],
) -> None:
    from te.cli.jobs import _chunks

    limit = 4096
    lines = [(n, job(f"k{n}", size=n * 37 % 700)) for n in range(1, 300)]
    parts = _chunks(lines, 1000, limit, options)

    assert [line for part in parts for line in part] == lines
    for part, after in itertools.pairwise(parts):
        sent = encode_body({"jobs": [r for _, r in part], **options})
        assert len(sent) <= limit  # what the client sends, measured as it sends it
        one_more = encode_body({"jobs": [r for _, r in [*part, after[0]]], **options})
        assert len(one_more) > limit
    assert len(encode_body({"jobs": [r for _, r in parts[-1]], **options})) <= limit


def test_batch_create_refuses_a_line_too_large_to_send_before_sending_anything(
    te: Te, http_target: HttpTarget
) -> None:
    endpoint(te, http_target)
    jobs = [job("small"), job("huge", size=MAX_BODY_BYTES), job("after")]

    result = te("batch", "create", jsonl(te, jobs))

    assert result.exit_code == 2, (result.stdout, result.stderr)  # a usage error
    assert "line 2" in result.stderr and "too large" in result.stderr
    assert te.json("jobs", "list") == []  # line 1 was not sent either


def test_batch_create_reports_the_committed_requests_when_a_later_one_fails(
    te: Te, http_target: HttpTarget
) -> None:
    endpoint(te, http_target)
    jobs = [job("a"), job("b"), job("c"), {"endpoint": "nope", "trigger": "IMMEDIATE"}, job("e")]
    path = jsonl(te, jobs)

    # --atomic: the second request (lines 3-4) is refused whole, 422, after the first
    # (lines 1-2) committed; the third (line 5) is never sent.
    result = te("batch", "create", path, "--chunk", "2", "--atomic", "--json")

    assert result.exit_code == 1
    summary = json.loads(result.stdout)  # the old te printed nothing on stdout
    assert (summary["created"], summary["stopped_at_line"]) == (2, 3)
    [first] = summary["batches"]
    assert te.json("batch", "get", first)["total"] == 2
    assert "Stopped at line 3" in result.stderr and "3 job request(s)" in result.stderr
    assert '"BATCH_REJECTED"' in result.stderr  # --json: the error envelope

    table = te("batch", "create", path, "--chunk", "2", "--atomic")  # the same, for people
    assert table.exit_code == 1
    assert "0 created, 2 already existed, 0 refused; batches: " in table.stdout
    assert "Stopped at line 3" in table.stderr and "HTTP 422" in table.stderr


def test_keys_work_with_only_te_url_and_te_api_key(te: Te) -> None:
    """As a user's README run does it: a separate process, TE_URL and TE_API_KEY, no
    database settings (the old te keys: a 40-line traceback, TE_DATABASE_URL is not set)."""
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(te.tmp)}
    env.update(TE_URL=te.url, TE_API_KEY=te.key, TE_CONFIG="")
    command = ["keys", "create", "ci", "--scope", "read", "--json"]
    done = subprocess.run(
        [sys.executable, "-c", "from te.cli import main; main()", *command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    created = json.loads(done.stdout)
    assert created["scope"] == "read" and created["api_key"].startswith("te_")
    assert te("jobs", "list", key=created["api_key"]).exit_code == 0


@pytest.mark.parametrize("command", [("keys", "create", "ci", "--scope", "read"), ("keys", "list")])
def test_keys_with_an_unreachable_api_is_one_line_and_exit_1(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    result = Te(f"http://127.0.0.1:{free_port()}", tmp_path)(*command)

    assert result.exit_code == 1
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("Error: cannot reach http://127.0.0.1:")
