"""``te`` against the real local stack: every command group, tables
and --json, the error path (exit status 1, the API's code and message on stderr)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.cli import Te
from tests.support.served import HttpTarget, Reply, free_port

ENDPOINT_YAML = """
name: hook
type: HTTP
spec:
  url: {url}
  method: POST
retry_policy:
  max_attempts: 1
  backoff: fixed
  initial_delay_ms: 0
  max_delay_ms: 1000
"""


def endpoint(te: Te, target: HttpTarget, path: str = "/ok", name: str = "hook") -> None:
    text = ENDPOINT_YAML.format(url=target.url(path)).replace("name: hook", f"name: {name}")
    te.ok("endpoints", "create", "-f", te.file(f"{name}.yaml", text))


def test_setup_groups_create_from_json_or_yaml_list_get_update_delete(
    te: Te, http_target: HttpTarget
) -> None:
    endpoint(te, http_target)
    listing = te.ok("endpoints", "list").stdout
    assert listing.splitlines()[0].split()[:2] == ["NAME", "TYPE"]
    assert "hook" in listing and "HTTP" in listing
    assert te.json("endpoints", "get", "hook")["spec"]["url"] == http_target.url("/ok")

    te.ok("configs", "create", "-f", te.file("c.json", {"name": "c", "values": {"a": 1}}))
    te.ok("configs", "update", "c", "-f", te.file("c2.yaml", "values:\n  a: 2\n"))
    assert te.json("configs", "get", "c")["values"] == {"a": 2}
    assert [c["name"] for c in te.json("configs", "list")] == ["c"]

    te.ok("secrets", "create", "-f", te.file("s.yaml", "name: token\nvalue: hunter2-secret\n"))
    for args in (("secrets", "list"), ("secrets", "get", "token"), ("secrets", "list", "--json")):
        out = te.ok(*args).stdout
        assert "token" in out and "hunter2-secret" not in out

    schema = "name: p\nschema:\n  type: object\n  required: [user_id]\n"
    te.ok("payload-specs", "create", "-f", te.file("p.yaml", schema))
    assert te.json("payload-specs", "get", "p")["schema"]["required"] == ["user_id"]
    assert "p" in te.ok("payload-specs", "list").stdout
    for group, name in (("payload-specs", "p"), ("secrets", "token"), ("configs", "c")):
        te.ok(group, "delete", name)
        missing = te(group, "get", name)
        assert missing.exit_code == 1 and "NOT_FOUND" in missing.stderr
    te.ok("endpoints", "delete", "hook")
    assert te.json("endpoints", "list") == []


def test_jobs_commands_and_watch_until_success(te: Te, http_target: HttpTarget) -> None:
    http_target.script("/ok", Reply(200, body='{"sent": true}'))
    endpoint(te, http_target)
    job = te.json(
        "jobs",
        "create",
        "-f",
        te.file(
            "j.json",
            {
                "endpoint": "hook",
                "trigger": "IMMEDIATE",
                "input": {"n": 1},
                "idempotency_key": "k1",
            },
        ),
    )
    execution_id = job["execution"]["execution_id"]

    watched = te("watch", execution_id, "--interval", "1", "--timeout", "60")
    assert watched.exit_code == 0, watched.output
    assert "status=SUCCESS" in watched.stdout and "attempt" in watched.stdout
    assert te.json("executions", "get", execution_id)["status"] == "SUCCESS"
    [attempt] = te.json("executions", "attempts", execution_id)
    assert attempt["status"] == "SUCCESS"
    assert "ATTEMPT_NUMBER" in te.ok("executions", "attempts", execution_id).stdout
    assert isinstance(te.json("executions", "logs", execution_id), list)

    assert te.json("jobs", "get", job["job_id"])["job_id"] == job["job_id"]
    assert te.json("jobs", "status", job["job_id"])["job_id"] == job["job_id"]
    assert [v["version"] for v in te.json("jobs", "versions", job["job_id"])] == [1]
    assert [e["status"] for e in te.json("jobs", "executions", job["job_id"])] == ["SUCCESS"]
    delayed = te.json(
        "jobs",
        "create",
        "-f",
        te.file(
            "d.yaml",
            "endpoint: hook\ntrigger: DELAYED\nrun_at: '2999-01-01T00:00:00Z'\n"
            "input: {}\nidempotency_key: d1\n",
        ),
    )
    listed = te.json("jobs", "list", "--trigger", "DELAYED")
    assert [j["job_id"] for j in listed] == [delayed["job_id"]]
    assert delayed["job_id"] in te.ok("jobs", "list", "--limit", "5").stdout
    cancelled = te.json("jobs", "cancel", delayed["job_id"])
    assert cancelled["execution"]["status"] == "CANCELLED"
    again = te("executions", "cancel", job["execution"]["execution_id"])
    assert again.exit_code == 1 and "EXECUTION_NOT_CANCELLABLE" in again.stderr


def test_watch_exits_3_when_the_execution_fails(te: Te, http_target: HttpTarget) -> None:
    http_target.script("/bad", Reply(500, body="no"))
    endpoint(te, http_target, "/bad", name="bad")
    job = te.json(
        "jobs",
        "create",
        "-f",
        te.file(
            "j.json",
            {
                "endpoint": "bad",
                "trigger": "IMMEDIATE",
                "input": {},
                "idempotency_key": "b1",
            },
        ),
    )
    watched = te("watch", job["execution"]["execution_id"], "--json", "--interval", "1")
    assert watched.exit_code == 3, watched.output
    events = [json.loads(line) for line in watched.stdout.splitlines()]
    assert events[-1]["event"] == "done" and events[-1]["status"] == "FAILED"
    assert any(e["event"] == "attempt" and e["status"] == "FAILED" for e in events)


def test_retry_a_failed_execution_then_watch_it_succeed(te: Te, http_target: HttpTarget) -> None:
    """The real POST /executions/{id}/retry: refused while not FAILED, then a new attempt
    that the fixed target accepts; the attempts keep their numbers."""
    http_target.script("/flaky", Reply(500, body="down"))
    endpoint(te, http_target, "/flaky", name="flaky")
    body = {"endpoint": "flaky", "trigger": "IMMEDIATE", "input": {}, "idempotency_key": "r1"}
    execution_id = te.json("jobs", "create", "-f", te.file("r.json", body))["execution"][
        "execution_id"
    ]
    assert te("watch", execution_id, "--interval", "1").exit_code == 3
    http_target.script("/flaky", Reply(200, body="up"))

    retried = te.json("executions", "retry", execution_id)

    assert retried["status"] == "QUEUED" and retried["attempt_count"] == 1
    assert te("watch", execution_id, "--interval", "1").exit_code == 0
    attempts = te.json("executions", "attempts", execution_id)
    items = attempts["items"] if isinstance(attempts, dict) else attempts
    assert [(a["attempt_number"], a["status"]) for a in items] == [(1, "FAILED"), (2, "SUCCESS")]
    again = te("executions", "retry", execution_id)
    assert again.exit_code == 1
    assert "EXECUTION_NOT_RETRYABLE" in again.stderr and "HTTP 409" in again.stderr
    missing = te("executions", "retry", "exec_nope")
    assert missing.exit_code == 1 and "EXECUTION_NOT_FOUND" in missing.stderr


def test_batch_create_chunks_a_json_lines_file_and_lists_refused_lines(
    te: Te, http_target: HttpTarget
) -> None:
    endpoint(te, http_target)
    good = [
        {"endpoint": "hook", "trigger": "IMMEDIATE", "input": {"n": n}, "idempotency_key": f"n{n}"}
        for n in range(5)
    ]
    lines = (
        [json.dumps(g) for g in good[:3]]
        + ["", json.dumps({"endpoint": "nope", "trigger": "IMMEDIATE", "idempotency_key": "x"})]
        + [json.dumps(g) for g in good[3:]]
    )
    path = te.file("jobs.jsonl", "\n".join(lines) + "\n")
    result = te("batch", "create", path, "--chunk", "2", "--json")
    assert result.exit_code == 1, result.output
    summary = json.loads(result.stdout)
    assert (summary["created"], summary["existing"]) == (5, 0)
    assert len(summary["batches"]) == 3  # 6 requests in chunks of 2
    [refused] = summary["refused"]
    assert (refused["line"], refused["code"]) == (5, "ENDPOINT_NOT_FOUND")  # line 4 is blank
    totals = [te.json("batch", "get", b)["total"] for b in summary["batches"]]
    assert totals == [2, 1, 2]  # in the file's order; the refused line's chunk made one job
    again = te("batch", "create", path)  # the same keys: every job already exists
    assert again.exit_code == 1
    assert "0 created, 5 already existed, 1 refused" in again.stdout
    assert "ENDPOINT_NOT_FOUND" in again.stdout
    bad = te("batch", "create", te.file("bad.jsonl", '{"a": 1}\nnot json\n'))
    assert bad.exit_code != 0 and "line 2" in bad.output


def test_errors_exit_1_with_the_api_message_and_json_envelope(te: Te) -> None:
    missing = te("jobs", "get", "job_missing")
    assert missing.exit_code == 1
    assert "JOB_NOT_FOUND" in missing.stderr and "HTTP 404" in missing.stderr
    assert "request req_" in missing.stderr
    as_json = te("jobs", "get", "job_missing", "--json")
    assert as_json.exit_code == 1
    assert json.loads(as_json.stderr)["error"]["code"] == "JOB_NOT_FOUND"
    refused = te("jobs", "create", "-f", te.file("x.json", {"trigger": "SOMETIMES"}))
    assert refused.exit_code == 1 and "INVALID_REQUEST" in refused.stderr
    wrong_key = te("endpoints", "list", key="not-a-key")
    assert wrong_key.exit_code == 1 and "UNAUTHORIZED" in wrong_key.stderr
    unreachable = te("endpoints", "list", TE_URL=f"http://127.0.0.1:{free_port()}")
    assert unreachable.exit_code == 1 and "cannot reach" in unreachable.stderr
    no_config = te("endpoints", "list", TE_URL="", TE_API_KEY="", TE_CONFIG="/nonexistent")
    assert no_config.exit_code == 1 and "TE_URL" in no_config.stderr
    not_a_file = te("endpoints", "create", "-f", "/nonexistent.yaml")
    assert not_a_file.exit_code == 2 and "cannot read" in not_a_file.stderr


def test_the_config_file_supplies_url_and_key(te: Te, tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'url = "{te.url}"\napi_key = "{te.key}"\n')
    result = te("health", "--json", TE_URL="", TE_API_KEY="", TE_CONFIG=str(config))
    assert result.exit_code == 0, result.output
    health = json.loads(result.stdout)
    assert (health["status"], health["database"], health["profile"]) == ("ok", "ok", "full")


def test_keys_create_a_working_key_and_revoke_it(te: Te) -> None:
    created = te.json("keys", "create", "ci", "--scope", "write")
    assert created["api_key"] and created["key_id"].startswith("key_")
    assert created["scope"] == "write"
    assert te("endpoints", "list", key=created["api_key"]).exit_code == 0
    listing = te.ok("keys", "list").stdout
    assert listing.split()[:3] == ["KEY_ID", "NAME", "SCOPE"] and created["key_id"] in listing
    assert created["api_key"] not in listing
    te.ok("keys", "revoke", created["key_id"])
    revoked = te("endpoints", "list", key=created["api_key"])
    assert revoked.exit_code == 1 and "UNAUTHORIZED" in revoked.stderr
    missing = te("keys", "revoke", "key_missing")
    assert missing.exit_code == 1 and "API_KEY_NOT_FOUND" in missing.stderr
    no_scope = te("keys", "create", "ci")
    assert no_scope.exit_code == 2 and "--scope" in no_scope.stderr


def test_the_installed_console_script_reports_errors_with_exit_status_1(te: Te) -> None:
    script = Path(sys.executable).parent / "te"
    env = {**os.environ, "TE_URL": te.url, "TE_API_KEY": te.key}
    done = subprocess.run(
        [str(script), "executions", "get", "exec_missing"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "EXECUTION_NOT_FOUND" in done.stderr


def test_a_delayed_job_by_delay_found_by_its_key_and_rescheduled(
    te: Te, http_target: HttpTarget
) -> None:
    endpoint(te, http_target)
    body = {"endpoint": "hook", "trigger": "DELAYED", "delay": "2d", "idempotency_key": "r1"}
    job = te.json("jobs", "create", "-f", te.file("r.json", body))
    assert job["execution"]["status"] == "PENDING"
    assert te.json("jobs", "find", "hook", "r1")["job_id"] == job["job_id"]
    missing = te("jobs", "find", "hook", "nope")
    assert missing.exit_code == 1 and "no job on endpoint 'hook'" in missing.stderr
    moved = te.json("jobs", "reschedule", job["job_id"], "--run-at", "2999-01-01T00:00:00Z")
    assert (moved["run_at"], moved["version"]) == ("2999-01-01T00:00:00Z", 2)
    assert te.json("jobs", "reschedule", job["job_id"], "--delay", "90s")["version"] == 3
    both = te("jobs", "reschedule", job["job_id"], "--delay", "1s", "--run-at", "x")
    assert both.exit_code != 0 and "exactly one of --run-at and --delay" in both.output
    versions = te.json("jobs", "versions", job["job_id"])
    assert [v["run_at"] for v in versions][:2] == [job["run_at"], "2999-01-01T00:00:00Z"]


def test_topics_commands_and_a_fan_out_from_jobs_create(te: Te, http_target: HttpTarget) -> None:
    endpoint(te, http_target, "/a", name="a")
    endpoint(te, http_target, "/b", name="b")
    te.ok("topics", "create", "-f", te.file("t.yaml", "name: orders\nendpoints: [a, b]\n"))
    assert te.ok("topics", "list").stdout.splitlines()[0].split()[:2] == ["NAME", "ENDPOINTS"]
    assert te.json("topics", "get", "orders")["endpoints"] == ["a", "b"]
    body = {"topic": "orders", "trigger": "IMMEDIATE", "idempotency_key": "k", "input": {}}
    fanned = te.json("jobs", "create", "-f", te.file("f.json", body))
    assert fanned["topic"] == "orders" and [j["endpoint"] for j in fanned["jobs"]] == ["a", "b"]
    refused = te("endpoints", "delete", "a")
    assert refused.exit_code == 1 and "used by topic(s) orders" in refused.stderr
    te.ok("topics", "update", "orders", "-f", te.file("t2.json", {"endpoints": ["b"]}))
    assert te.json("topics", "get", "orders")["endpoints"] == ["b"]
    te.ok("topics", "delete", "orders")
    missing = te("topics", "get", "orders")
    assert missing.exit_code == 1 and "TOPIC_NOT_FOUND" in missing.stderr


def test_a_per_key_limit_and_a_jobs_concurrency_key_from_files(
    te: Te, http_target: HttpTarget
) -> None:
    limited = ENDPOINT_YAML.format(url=http_target.url("/ok")) + (
        "flow_control:\n  max_concurrency_per_key: 2\n"
    )
    te.ok("endpoints", "create", "-f", te.file("limited.yaml", limited))
    assert te.json("endpoints", "get", "hook")["flow_control"] == {"max_concurrency_per_key": 2}
    body = {"endpoint": "hook", "trigger": "DELAYED", "delay": "1h", "idempotency_key": "c1"}
    job = te.json("jobs", "create", "-f", te.file("c.json", {**body, "concurrency_key": "t-1"}))
    assert te.json("jobs", "get", job["job_id"])["concurrency_key"] == "t-1"
    both = {**body, "idempotency_key": "c2", "concurrency_key": "t-1", "ordering_key": "o"}
    refused = te("jobs", "create", "-f", te.file("both.json", both))
    assert refused.exit_code == 1 and "INVALID_REQUEST" in refused.stderr
    assert "'ordering_key' and 'concurrency_key'" in refused.stderr
