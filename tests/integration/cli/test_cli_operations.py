"""``te`` and the SDK for the operations they used to lack, against the real local stack:
scoped keys, endpoint pause/resume/redrive, cron job update/pause/resume/trigger, the
execution listing and dead letters, a batch's jobs and cancel, overview, metrics, openapi."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from te.client import Client, Forbidden
from tests.integration.cli.test_cli import endpoint
from tests.support.cli import Te
from tests.support.served import HttpTarget, Reply

CRON = {
    "endpoint": "hook",
    "trigger": "CRON",
    "cron": "0 3 * * *",
    "timezone": "UTC",
    "input": {"n": 1},
}


def test_a_read_key_reads_but_is_refused_changes_and_a_write_key_keys(te: Te) -> None:
    reader = te.json("keys", "create", "dashboards", "--scope", "read")["api_key"]
    writer = te.json("keys", "create", "deploys", "--scope", "write")["api_key"]
    assert te("endpoints", "list", key=reader).exit_code == 0
    assert te("overview", key=reader).exit_code == 0
    refused = te("configs", "create", "-f", te.file("c.json", {"name": "c", "values": {}}))
    assert refused.exit_code == 0  # the bootstrap key is admin
    denied = te("configs", "delete", "c", key=reader)
    assert denied.exit_code == 1
    assert "INSUFFICIENT_SCOPE" in denied.stderr and "HTTP 403" in denied.stderr
    assert te("configs", "delete", "c", key=writer).exit_code == 0
    no_admin = te("keys", "list", key=writer)
    assert no_admin.exit_code == 1 and "INSUFFICIENT_SCOPE" in no_admin.stderr
    try:
        Client(te.url, reader).configs.create({"name": "d", "values": {}})
        raise AssertionError("a read key created a config")
    except Forbidden as exc:
        assert (exc.status, exc.code) == (403, "INSUFFICIENT_SCOPE")


def test_endpoint_pause_and_resume(te: Te, http_target: HttpTarget) -> None:
    endpoint(te, http_target)
    paused = te.json("endpoints", "pause", "hook")
    assert paused["paused_at"] is not None and paused["paused_reason"] == "OPERATOR"
    assert te.json("endpoints", "get", "hook")["paused_at"] == paused["paused_at"]
    listed = te.ok("endpoints", "list").stdout
    assert "PAUSED_REASON" in listed and "OPERATOR" in listed
    resumed = te.json("endpoints", "resume", "hook")
    assert (resumed["paused_at"], resumed["paused_reason"]) == (None, None)
    assert resumed["auto_pause_after_ms"] == 432_000_000
    missing = te("endpoints", "pause", "nope")
    assert missing.exit_code == 1 and "ENDPOINT_NOT_FOUND" in missing.stderr


def test_cron_job_update_pause_resume_and_trigger(te: Te, http_target: HttpTarget) -> None:
    http_target.script("/ok", Reply(200, body="{}"))
    endpoint(te, http_target)
    job = te.json("jobs", "create", "-f", te.file("cron.json", CRON))
    updated = te.json(
        "jobs", "update", job["job_id"], "-f", te.file("u.yaml", "cron: '0 4 * * *'\n")
    )
    assert updated["version"] == 2 and updated["cron"] == "0 4 * * *"
    job_id = updated["job_id"]
    assert te.json("jobs", "pause", job_id)["paused_at"] is not None
    assert te.json("jobs", "resume", job_id, "--catch-up")["paused_at"] is None
    triggered = te.json("jobs", "trigger", job_id)
    execution_id = triggered["execution_id"]
    assert te("watch", execution_id, "--interval", "1").exit_code == 0
    delayed = {"endpoint": "hook", "trigger": "DELAYED", "run_at": "2099-01-01T00:00:00Z"}
    delayed["idempotency_key"] = "later"
    one_shot = te.json("jobs", "create", "-f", te.file("d.json", delayed))
    not_cron = te("jobs", "pause", one_shot["job_id"])
    assert not_cron.exit_code == 1 and "JOB_NOT_PAUSABLE" in not_cron.stderr


def test_dead_letters_listed_then_redriven(te: Te, http_target: HttpTarget) -> None:
    http_target.script("/bad", Reply(500, body="down"))
    endpoint(te, http_target, "/bad", name="bad")
    since = (datetime.now(UTC) - timedelta(minutes=5)).isoformat()
    body = {"endpoint": "bad", "trigger": "IMMEDIATE", "input": {}, "idempotency_key": "d1"}
    execution_id = te.json("jobs", "create", "-f", te.file("j.json", body))["execution"][
        "execution_id"
    ]
    assert te("watch", execution_id, "--interval", "1").exit_code == 3

    [dead] = te.json("dead-letters")
    assert dead["execution_id"] == execution_id and dead["status"] == "FAILED"
    assert dead["error_type"]
    table = te.ok("dead-letters", "--endpoint", "bad").stdout
    assert table.split()[0] == "EXECUTION_ID" and execution_id in table
    listed = te.json("executions", "list", "--status", "FAILED", "--limit", "1")
    assert [e["execution_id"] for e in listed] == [execution_id]
    assert te.json("executions", "list", "--status", "SUCCESS") == []

    http_target.script("/bad", Reply(200, body="up"))
    until = (datetime.now(UTC) + timedelta(minutes=5)).isoformat()
    redriven = te.json("endpoints", "redrive", "bad", "--since", since, "--until", until, "--all")
    assert redriven == {"requeued": 1, "more": False}
    assert te("watch", execution_id, "--interval", "1").exit_code == 0
    assert te.json("dead-letters") == []


def test_batch_jobs_and_cancel(te: Te, http_target: HttpTarget) -> None:
    endpoint(te, http_target)
    lines = "".join(
        json.dumps(
            {
                "endpoint": "hook",
                "trigger": "DELAYED",
                "run_at": "2099-01-01T00:00:00Z",
                "idempotency_key": f"b{n}",
            }
        )
        + "\n"
        for n in range(3)
    )
    [batch_id] = te.json("batch", "create", te.file("b.jsonl", lines))["batches"]
    jobs = te.json("batch", "jobs", batch_id)
    assert len(jobs) == 3 and {j["endpoint"] for j in jobs} == {"hook"}
    assert te.json("batch", "jobs", batch_id, "--status", "SUCCESS") == []
    cancelled = te.json("batch", "cancel", batch_id)
    assert cancelled["cancelled"] == 3
    assert te.json("batch", "get", batch_id)["counts"].get("CANCELLED") == 3


def test_overview_metrics_and_openapi(te: Te) -> None:
    overview = te.json("overview")
    assert isinstance(overview, dict) and overview
    metrics = te.ok("metrics").stdout
    assert "# TYPE" in metrics
    document = json.loads(te.ok("openapi").stdout)
    assert document["openapi"].startswith("3.1") and "/keys" in document["paths"]


def test_retry_and_redrive_with_the_endpoints_current_definition(
    te: Te, http_target: HttpTarget
) -> None:
    """After fixing a broken endpoint's URL, te's retry and redrive with
    --endpoint-version current reach the new URL; a job's own settings pass through
    ``te jobs create``."""
    http_target.script("/old", Reply(500, body="down"))
    http_target.script("/new", Reply(200, body="up"))
    endpoint(te, http_target, "/old", name="moved")
    body = {"endpoint": "moved", "trigger": "IMMEDIATE", "input": {}, "timeout_ms": 5000}
    ids = [
        te.json("jobs", "create", "-f", te.file(f"{k}.json", {**body, "idempotency_key": k}))[
            "execution"
        ]["execution_id"]
        for k in ("m1", "m2")
    ]
    for execution_id in ids:
        assert te("watch", execution_id, "--interval", "1").exit_code == 3
    spec = {"url": http_target.url("/new"), "method": "POST"}
    fixed = {"name": "moved", "type": "HTTP", "spec": spec}
    te.ok("endpoints", "update", "moved", "-f", te.file("fixed.json", fixed))

    retried = te.json("executions", "retry", ids[0], "--endpoint-version", "current")
    assert retried["endpoint_version"] == "current"
    assert te("watch", ids[0], "--interval", "1").exit_code == 0
    since = (datetime.now(UTC) - timedelta(minutes=5)).isoformat()
    until = (datetime.now(UTC) + timedelta(minutes=5)).isoformat()
    window = ("--since", since, "--until", until, "--endpoint-version", "current")
    assert te.json("endpoints", "redrive", "moved", *window) == {"requeued": 1, "more": False}
    assert te("watch", ids[1], "--interval", "1").exit_code == 0
    assert len(http_target.received("/new")) == 2
    bad = te("executions", "retry", ids[0], "--endpoint-version", "latest")
    assert bad.exit_code == 2  # click refuses the choice before any request
