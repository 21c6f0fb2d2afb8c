"""Completion callbacks and batch on_complete, delivered by the real worker to real HTTP
targets on loopback."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chalicelib.db.connection import Database, Transaction
from chalicelib.db.queries import queries
from chalicelib.scheduler.materializer import CronMaterializer
from chalicelib.scheduler.reclaimer import StuckReclaimer
from chalicelib.services import callbacks
from chalicelib.worker.postgres import _finalize
from tests.support.api_client import ApiClient
from tests.support.factories import register_endpoint
from tests.support.served import HttpTarget, Reply
from tests.support.worker_runs import settle

#: The claim or the wake-up decides what these tests see: make test runs them again in
#: CockroachDB's configuration (test-cockroach).
pytestmark = pytest.mark.claim_path


def register(api: ApiClient, target: HttpTarget, name: str, **extra: Any) -> None:
    """``name`` posting to ``target``'s ``/name``, which must answer 200."""
    spec = {"url": target.url(f"/{name}"), "method": "POST", "expected_status_codes": [200]}
    register_endpoint(api, name, spec=spec, **extra)


@pytest.fixture
def hooks(api: ApiClient, http_target: HttpTarget) -> HttpTarget:
    """Endpoints 'hook' (the job's), 'cb-ok' and 'cb-fail' (its callbacks), 'done'."""
    policy = {"max_attempts": 2, "backoff": "fixed", "initial_delay_ms": 0}
    register(api, http_target, "hook", retry_policy=policy)
    for name in ("cb-ok", "cb-fail", "done"):
        register(api, http_target, name)
        http_target.script(f"/{name}", Reply(200, body="{}"))
    return http_target


def job(key: str, **extra: Any) -> dict[str, Any]:
    body = {"endpoint": "hook", "trigger": "IMMEDIATE", "idempotency_key": key, "input": {}}
    body.update(on_success="cb-ok", on_failure="cb-fail")
    body.update(extra)
    return body


def callbacks_of(db: Database, execution_id: str) -> list[dict[str, Any]]:
    return db.run(
        "SELECT j.job_id, j.endpoint, j.trigger_type, j.idempotency_key, j.input,"
        " j.callback_depth, e.execution_id, e.status FROM jobs j"
        " JOIN executions e USING (job_id) WHERE j.parent_execution_id = :id",
        id=execution_id,
    )


def test_success_calls_back_on_success_with_the_documented_input(
    api: ApiClient, database: Database, make_worker: Any, hooks: HttpTarget
) -> None:
    hooks.script("/hook", Reply(200, body='{"ok": true}'))
    created = api.post("/jobs", job("k1")).body
    assert (created["on_success"], created["on_failure"]) == ("cb-ok", "cb-fail")
    execution_id = created["execution"]["execution_id"]
    worker = make_worker()
    settle(worker, database, [execution_id])
    [callback] = callbacks_of(database, execution_id)
    assert (callback["endpoint"], callback["trigger_type"]) == ("cb-ok", "IMMEDIATE")
    assert callback["idempotency_key"] == f"callback:{execution_id}:1"
    assert callback["callback_depth"] == 1
    report = callback["input"]
    assert report["status"] == "SUCCESS" and "error" not in report
    assert {k: report[k] for k in ("execution_id", "job_id", "endpoint", "attempt_count")} == {
        "execution_id": execution_id,
        "job_id": created["job_id"],
        "endpoint": "hook",
        "attempt_count": 1,
    }
    assert report["output"]["status_code"] == 200 and report["batch_id"] is None
    shown = api.get(f"/jobs/{callback['job_id']}").body
    assert shown["parent_execution_id"] == execution_id
    settle(worker, database, [callback["execution_id"]])  # an ordinary job: delivered
    assert len(hooks.received("/cb-ok")) == 1
    assert hooks.received("/cb-fail") == []
    logs = api.get(f"/executions/{execution_id}/logs").body["items"]
    assert any(callback["job_id"] in line["message"] for line in logs)


def test_exhausted_retries_call_back_on_failure_with_the_last_error(
    api: ApiClient, database: Database, make_worker: Any, hooks: HttpTarget
) -> None:
    hooks.script("/hook", Reply(500, body="down"))
    created = api.post("/jobs", job("k2")).body
    execution_id = created["execution"]["execution_id"]
    settle(make_worker(), database, [execution_id])
    [callback] = callbacks_of(database, execution_id)
    assert callback["endpoint"] == "cb-fail"
    report = callback["input"]
    assert (report["status"], report["attempt_count"]) == ("FAILED", 2)
    assert report["error"] is not None and "output" not in report


def test_no_callback_without_one_and_none_for_a_cancelled_execution(
    api: ApiClient, database: Database, make_worker: Any, hooks: HttpTarget
) -> None:
    hooks.script("/hook", Reply(200, body="{}"))
    plain = {"endpoint": "hook", "trigger": "IMMEDIATE", "idempotency_key": "p", "input": {}}
    execution_id = api.post("/jobs", plain).body["execution"]["execution_id"]
    settle(make_worker(), database, [execution_id])
    assert callbacks_of(database, execution_id) == []
    cancelled = api.post("/jobs", job("c")).body
    api.post(f"/jobs/{cancelled['job_id']}/cancel")
    assert callbacks_of(database, cancelled["execution"]["execution_id"]) == []


def test_a_reclaimed_then_finished_execution_calls_back_exactly_once(
    api: ApiClient, database: Database, make_worker: Any, hooks: HttpTarget
) -> None:
    """Worker A claims and stalls; its lease expires and the reclaimer hands the execution
    to worker B, which finishes it; A's late result then arrives. One callback."""
    hooks.script("/hook", Reply(200, body="{}"))
    execution_id = api.post("/jobs", job("k3")).body["execution"]["execution_id"]
    long_ago = datetime.now(UTC) - timedelta(hours=1)
    database.execute(
        "UPDATE executions SET status = 'RUNNING', worker_id = 'worker-a', attempt_count = 1,"
        " started_at = :t, lease_expires_at = :t WHERE execution_id = :id",
        t=long_ago,
        id=execution_id,
    )
    [reclaimed] = StuckReclaimer(database, timeout_sec=60).reclaim()
    assert reclaimed.status == "RETRYING"
    settle(make_worker(worker_id="worker-b"), database, [execution_id])
    late = {
        "execution_id": execution_id,
        "attempt_number": 1,
        "attempt_status": "SUCCESS",
        "next_status": "SUCCESS",
        "started_at": long_ago.isoformat(),
        "completed_at": datetime.now(UTC).isoformat(),
        "duration_ms": 5,
        "log_level": "INFO",
        "log_message": "late",
    }
    rows = database.transaction(lambda tx: _finalize(tx, json.dumps([late]), "worker-a"))
    assert rows == []  # the compare-and-set refuses the stale result
    # Even a second follow-up for the same ended execution finds the callback's key taken.
    database.transaction(
        lambda tx: callbacks.follow_up(tx, execution_ids=[execution_id], batch_ids=[])
    )
    assert len(callbacks_of(database, execution_id)) == 1


def test_unknown_callback_endpoint_and_too_deep_chains_are_422(
    api: ApiClient, database: Database, hooks: HttpTarget
) -> None:
    reply = api.post("/jobs", job("k4", on_failure="nope"))
    assert (reply.status, reply.error_code) == (422, "INVALID_CALLBACK")
    # cb-ok -> done -> cb-fail -> cb-ok ...: an endless chain through endpoint defaults.
    database.execute("UPDATE endpoints SET on_success = 'done' WHERE name = 'cb-ok'")
    database.execute("UPDATE endpoints SET on_success = 'cb-fail' WHERE name = 'done'")
    assert api.post("/jobs", job("k5", on_failure=None)).status == 201  # depth 3: allowed
    database.execute("UPDATE endpoints SET on_failure = 'cb-ok' WHERE name = 'cb-fail'")
    reply = api.post("/jobs", job("k6", on_failure=None))
    assert (reply.status, reply.error_code) == (422, "INVALID_CALLBACK")
    assert "3" in reply.body["error"]["message"]
    assert database.run("SELECT count(*) AS n FROM jobs")[0]["n"] == 1


def test_a_batch_on_complete_fires_once_after_two_workers_finish_it(
    api: ApiClient, database: Database, make_worker: Any, hooks: HttpTarget
) -> None:
    hooks.script("/hook", Reply(200, body="{}"))
    items = [
        {"endpoint": "hook", "trigger": "IMMEDIATE", "idempotency_key": f"b{i}", "input": {}}
        for i in range(20)
    ]
    created = api.post("/jobs/batch", {"jobs": items, "on_complete": "done"}).body
    batch_id = created["batch_id"]
    ids = [i["job"]["execution"]["execution_id"] for i in created["items"]]
    assert api.get(f"/batches/{batch_id}").body["status"] == "RUNNING"
    workers = [make_worker(worker_id=f"w{n}", worker_max_concurrent=3) for n in range(2)]
    errors: list[BaseException] = []

    def run(worker: Any) -> None:
        try:
            settle(worker, database, ids)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(w,)) for w in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    workers_used = database.run(
        "SELECT count(DISTINCT worker_id) AS n FROM executions WHERE batch_id = :b", b=batch_id
    )
    assert workers_used[0]["n"] >= 1
    batch = api.get(f"/batches/{batch_id}").body
    assert (batch["status"], batch["counts"]["SUCCESS"], batch["total"]) == ("COMPLETED", 20, 20)
    assert batch["completed_at"] is not None
    fired = database.run(
        "SELECT input, idempotency_key FROM jobs WHERE endpoint = 'done'",
    )
    assert len(fired) == 1
    assert fired[0]["idempotency_key"] == f"batch:{batch_id}"
    assert fired[0]["input"]["counts"]["SUCCESS"] == 20
    assert fired[0]["input"]["status"] == "COMPLETED"


def test_batch_on_complete_raced_by_two_finalizers_of_its_last_two_children_fires_once(
    api: ApiClient, database: Database, hooks: HttpTarget
) -> None:
    """Both finalize statements run before either transaction checks the batch, and neither
    commits before the other has checked if it can: without the batch row lock each sees
    the other's child RUNNING and neither fires."""
    items = [
        {"endpoint": "hook", "trigger": "IMMEDIATE", "idempotency_key": f"r{i}", "input": {}}
        for i in range(2)
    ]
    created = api.post("/jobs/batch", {"jobs": items, "on_complete": "done"}).body
    batch_id = created["batch_id"]
    ids = [i["job"]["execution"]["execution_id"] for i in created["items"]]
    for n, execution_id in enumerate(ids):
        database.execute(
            "UPDATE executions SET status = 'RUNNING', worker_id = :w, attempt_count = 1,"
            " started_at = now() WHERE execution_id = :id",
            w=f"w{n}",
            id=execution_id,
        )
    both_updated = threading.Barrier(2, timeout=10)
    checked = [threading.Event(), threading.Event()]
    errors: list[BaseException] = []

    def finalize(n: int) -> None:
        now = datetime.now(UTC).isoformat()
        result = {
            "execution_id": ids[n],
            "attempt_number": 1,
            "attempt_status": "SUCCESS",
            "next_status": "SUCCESS",
            "started_at": now,
            "completed_at": now,
            "duration_ms": 1,
            "log_level": "INFO",
            "log_message": "ok",
        }

        def work(tx: Transaction) -> None:
            # _finalize's two steps, with both children updated before either checks.
            tx.execute(queries["worker_read_committed"])
            rows = tx.run(
                queries["worker_finalize_batch"],
                results=json.dumps([result]),
                worker_id=f"w{n}",
                writer=f"w{n}",
            )
            assert [r["batch_id"] for r in rows] == [batch_id]
            both_updated.wait()
            callbacks.follow_up(tx, execution_ids=[], batch_ids=[batch_id])
            # Hold the commit until the other has checked too, unless it cannot get there
            # (it waits for this transaction's batch row lock): then commit after a while.
            checked[n].set()
            checked[1 - n].wait(timeout=2)

        try:
            database.transaction(work)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=finalize, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    fired = database.run("SELECT input FROM jobs WHERE endpoint = 'done'")
    assert len(fired) == 1
    assert fired[0]["input"]["counts"]["SUCCESS"] == 2


def test_an_endpoint_names_default_callbacks_for_its_jobs(
    api: ApiClient, database: Database, make_worker: Any, hooks: HttpTarget
) -> None:
    spec = {"url": hooks.url("/hook"), "method": "POST", "expected_status_codes": [200]}
    bad = {"name": "dflt", "type": "HTTP", "spec": spec, "on_success": "nope"}
    reply = api.post("/endpoints", bad)
    assert (reply.status, reply.error_code) == (422, "INVALID_CALLBACK")
    register(api, hooks, "dflt", on_success="cb-ok", on_failure="cb-fail")
    assert api.get("/endpoints/dflt").body["on_success"] == "cb-ok"
    hooks.script("/dflt", Reply(200, body="{}"))
    body = {"endpoint": "dflt", "trigger": "IMMEDIATE", "idempotency_key": "d", "input": {}}
    created = api.post("/jobs", body).body
    assert created["on_success"] == "cb-ok"  # the endpoint's default, resolved at creation
    overridden = api.post("/jobs", {**body, "idempotency_key": "e", "on_success": "done"}).body
    assert overridden["on_success"] == "done"
    execution_id = created["execution"]["execution_id"]
    settle(make_worker(), database, [execution_id])
    [callback] = callbacks_of(database, execution_id)
    assert callback["endpoint"] == "cb-ok"


def test_the_reclaimer_failing_the_last_child_calls_back_and_completes_the_batch(
    api: ApiClient, database: Database, hooks: HttpTarget
) -> None:
    """An execution that ends FAILED because its worker died (no attempts left) has the
    same follow-ups as one a worker finalizes: its on_failure and its batch's on_complete."""
    created = api.post("/jobs/batch", {"jobs": [job("lost")], "on_complete": "done"}).body
    execution_id = created["items"][0]["job"]["execution"]["execution_id"]
    long_ago = datetime.now(UTC) - timedelta(hours=1)
    database.execute(
        "UPDATE executions SET status = 'RUNNING', worker_id = 'dead', attempt_count = 2,"
        " started_at = :t, lease_expires_at = :t WHERE execution_id = :id",
        t=long_ago,
        id=execution_id,
    )
    [reclaimed] = StuckReclaimer(database, timeout_sec=60).reclaim()
    assert reclaimed.status == "FAILED"
    [callback] = callbacks_of(database, execution_id)
    assert callback["endpoint"] == "cb-fail"
    assert callback["input"]["error"]["type"] == "WORKER_LOST"
    assert callback["input"]["batch_id"] == created["batch_id"]
    fired = database.run("SELECT input FROM jobs WHERE endpoint = 'done'")
    assert [f["input"]["counts"]["FAILED"] for f in fired] == [1]


@pytest.mark.parametrize("route", ["executions", "jobs", "batches"])
def test_cancelling_the_last_open_child_completes_the_batch(
    api: ApiClient, database: Database, hooks: HttpTarget, route: str
) -> None:
    items = [job("x1"), job("x2")]
    created = api.post("/jobs/batch", {"jobs": items, "on_complete": "done"}).body
    first, second = (i["job"] for i in created["items"])
    database.execute(
        "UPDATE executions SET status = 'SUCCESS', completed_at = now() WHERE execution_id = :id",
        id=first["execution"]["execution_id"],
    )
    path = {
        "executions": f"/executions/{second['execution']['execution_id']}/cancel",
        "jobs": f"/jobs/{second['job_id']}/cancel",
        "batches": f"/batches/{created['batch_id']}/cancel",
    }[route]
    assert api.post(path).status == 200
    fired = database.run("SELECT input FROM jobs WHERE endpoint = 'done'")
    assert len(fired) == 1
    counts = fired[0]["input"]["counts"]
    assert (counts["SUCCESS"], counts["CANCELLED"]) == (1, 1)
    assert api.post(path).status == 200  # a repeated cancel changes nothing
    assert len(database.run("SELECT 1 FROM jobs WHERE endpoint = 'done'")) == 1
    assert callbacks_of(database, second["execution"]["execution_id"]) == []


def test_a_new_cron_version_keeps_the_callbacks_and_ticks_carry_them(
    api: ApiClient, database: Database, hooks: HttpTarget
) -> None:
    body = {"endpoint": "hook", "trigger": "CRON", "cron": "0 9 * * *", "timezone": "UTC"}
    created = api.post("/jobs", {**body, "on_failure": "cb-fail"}).body
    assert created["on_failure"] == "cb-fail"
    replaced = api.put(f"/jobs/{created['job_id']}", {"cron": "0 10 * * *"}).body
    assert (replaced["version"], replaced["on_failure"]) == (2, "cb-fail")
    tick = datetime.now(UTC) + timedelta(days=2)
    CronMaterializer(database, clock=lambda: tick).run_once()
    rows = database.run(
        "SELECT on_success, on_failure, batch_id FROM executions WHERE job_id = :id",
        id=replaced["job_id"],
    )
    assert rows and all(
        (r["on_success"], r["on_failure"], r["batch_id"]) == (None, "cb-fail", None) for r in rows
    )
