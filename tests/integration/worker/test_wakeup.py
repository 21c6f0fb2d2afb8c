"""Cross-process wake-up: POST /jobs NOTIFYs, an idle worker LISTENing claims at once.

The worker here polls every 10 s. Whether a claim came from a notification or from the
poll is told by how the worker's idle sleep ended (``Worker.sleeps``), not by timing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from chalicelib.db.connection import Database
from chalicelib.worker import Worker
from tests.support.api_client import ApiClient
from tests.support.seed.worker import execution, http_spec, seed
from tests.support.waiting import wait_for

#: The claim or the wake-up decides what these tests see: make test runs them again in
#: CockroachDB's configuration (test-cockroach).
pytestmark = pytest.mark.claim_path

LONG_POLL_MS = 10_000


@pytest.fixture
def running() -> Iterator[Callable[[Worker], None]]:
    """Run workers in threads; stopped at the end of the test."""
    threads: list[tuple[Worker, threading.Thread]] = []

    def start(worker: Worker) -> None:
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        threads.append((worker, thread))

    yield start
    for worker, thread in threads:
        worker.stop()
        thread.join(timeout=5)


#: How long a wait here may take before it fails: below the 10 s idle poll (LONG_POLL_MS),
#: so a claim seen within it was not the poll's (the counters asserted after say which woke).
WAKE_GUARD_S = 8.0


def create_immediate(api: ApiClient, database: Database, target_url: Callable[[str], str]) -> str:
    """An IMMEDIATE job through the API (its own Database); returns the execution id."""
    endpoint = seed(database, spec=http_spec(target_url("/hook")), inputs=[], count=0).endpoint
    reply = api.post(
        "/jobs",
        {
            "endpoint": endpoint,
            "trigger": "IMMEDIATE",
            "idempotency_key": "wake-1",
            "input": {"user_id": "u1"},
        },
    )
    assert reply.status == 201, reply.body
    return str(reply.body["execution"]["execution_id"])


def claimed(database: Database, execution_id: str) -> Callable[[], bool]:
    return lambda: execution(database, execution_id)["status"] != "QUEUED"


@pytest.mark.postgres_only
def test_notification_ends_the_idle_sleep(
    database: Database, api: ApiClient, make_worker, running, http_target
) -> None:
    worker = make_worker(worker_poll_interval_ms=LONG_POLL_MS)
    running(worker)
    wait_for(
        lambda: worker.listener is not None and worker.listener.connects == 1,
        "a listener",
        timeout=WAKE_GUARD_S,
    )

    execution_id = create_immediate(api, database, http_target.url)

    wait_for(claimed(database, execution_id), "the claim", timeout=WAKE_GUARD_S)
    assert worker.sleeps.timed_out == 0  # claimed before the 10 s poll could fire
    assert worker.sleeps.woken >= 1
    wait_for(
        lambda: execution(database, execution_id)["status"] == "SUCCESS",
        "delivered",
        timeout=WAKE_GUARD_S,
    )


def test_without_notify_only_the_poll_claims(
    database: Database, api: ApiClient, make_worker, running, http_target
) -> None:
    worker = make_worker(worker_poll_interval_ms=1000, wakeup_notify="off")
    running(worker)
    # Asleep: only a timer or a signal claims now.
    wait_for(lambda: worker.sleeps.started >= 1, "the idle sleep", timeout=WAKE_GUARD_S)

    execution_id = create_immediate(api, database, http_target.url)

    wait_for(claimed(database, execution_id), "the claim", timeout=WAKE_GUARD_S)
    assert worker.listener is None
    assert worker.sleeps.woken == 0
    assert worker.sleeps.timed_out >= 1


@pytest.mark.postgres_only
def test_listener_recovers_from_a_killed_connection(
    database: Database, api: ApiClient, make_worker, running, http_target
) -> None:
    worker = make_worker(worker_poll_interval_ms=LONG_POLL_MS)
    running(worker)
    wait_for(
        lambda: worker.listener is not None and worker.listener.backend_pid,
        "a listener",
        timeout=WAKE_GUARD_S,
    )
    listener = worker.listener
    assert listener is not None
    killed = database.run("SELECT pg_terminate_backend(:pid) AS ok", pid=listener.backend_pid)
    assert killed[0]["ok"] is True

    wait_for(
        lambda: listener.connects == 2 and listener.backend_pid, "a reconnect", timeout=WAKE_GUARD_S
    )
    execution_id = create_immediate(api, database, http_target.url)

    wait_for(claimed(database, execution_id), "the claim", timeout=WAKE_GUARD_S)
    assert worker.sleeps.timed_out == 0
