"""Fault 5: delivery targets down, then back, one run per transport.

``TE_CHAOS_N`` (default 1,000) IMMEDIATE executions per transport, retry policy
``max_attempts=10, fixed, 500 ms``, delivered by ``python -m chalicelib.worker``:

* HTTP: nothing listens on the endpoint's port (connection refused), then a target comes up
  on that port;
* Redis Stream: a ``redis-server`` of the test's own on a fixed port, stopped, then started
  again on the same port;
* Kafka: a Tansu broker of the test's own on a fixed port, stopped, then started again.

The target stays down until every execution has had a failed attempt, or for
``MAX_DOWN_S`` once the first attempt failed (well inside the policy's ~3.4 s minimum retry
horizon). Then: every failed attempt has the spec's error type for the transport, no
execution used more than ``max_attempts``, consecutive attempts are at least the backoff
apart (500 ms - 25 % jitter), every execution ends SUCCESS and reached the target.
"""

from __future__ import annotations

import itertools
import subprocess
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from chalicelib.db.connection import Database
from tests.chaos.figures import chaos_n, write_figures
from tests.chaos.harness import TERMINAL, Stack, figures, status_counts
from tests.support.seed.worker import http_spec, retry_policy, seed
from tests.support.served import (
    HttpTarget,
    _redis_server_binary,
    _stop,
    _tansu_binary,
    free_port,
    wait_for_port,
)

pytestmark = pytest.mark.chaos

POLICY = retry_policy(max_attempts=10, backoff="fixed", initial_delay_ms=500)
#: The smallest delay the policy allows between two attempts (500 ms minus 25 % jitter),
#: less a margin for the two clocks involved (worker and database, same host).
MIN_GAP_S = 0.375 - 0.05
MAX_DOWN_S = 2.5
FIRST_FAILURE_S = 30.0
TIMEOUT_MS = 1000
ERROR_TYPES = {
    "HTTP": {"CONNECTION_ERROR", "TIMEOUT"},
    "REDIS_STREAM": {"CONNECTION_ERROR", "TIMEOUT"},
    "KAFKA": {"BROKER_ERROR", "TIMEOUT"},
}


@dataclass
class Transport:
    """One target: how to start/stop it, the endpoint spec, and what it received."""

    endpoint_type: str
    spec: dict[str, Any]
    start: Callable[[], None]
    stop: Callable[[], None]
    received: Callable[[set[str]], Counter[str]]
    state: dict[str, Any] = field(default_factory=dict)


def http_transport() -> Transport:
    port = free_port()
    state: dict[str, Any] = {}

    def start() -> None:
        state["target"] = HttpTarget(port)

    def stop() -> None:
        if "target" in state:
            state.pop("target").close()

    def received(_ids: set[str]) -> Counter[str]:
        requests = state["target"].received("/hook")
        return Counter(r.headers.get("x-task-executor-execution-id") for r in requests)

    spec = http_spec(f"http://127.0.0.1:{port}/hook", timeout_ms=TIMEOUT_MS)
    return Transport("HTTP", spec, start, stop, received, state)


def process_transport(
    endpoint_type: str, args: Callable[[int], list[str]], spec: Callable[[int], dict[str, Any]]
) -> Transport:
    """A target that is a child process listening on a fixed port."""
    port = free_port()
    state: dict[str, Any] = {}

    def start() -> None:
        proc = subprocess.Popen(args(port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        state["proc"] = proc
        wait_for_port(port, proc)

    def stop() -> None:
        if "proc" in state:
            _stop(state.pop("proc"))

    return Transport(endpoint_type, spec(port), start, stop, lambda ids: Counter(), state)


def redis_transport() -> Transport:
    workdir = tempfile.mkdtemp(prefix="te-chaos-redis-")
    stream = "chaos-" + uuid.uuid4().hex[:8]
    transport = process_transport(
        "REDIS_STREAM",
        lambda port: [
            *(_redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1"),
            *("--save", "", "--appendonly", "no", "--dir", workdir),
        ],
        lambda port: {
            "redis_url": f"redis://127.0.0.1:{port}/0",
            "stream": stream,
            "fields_template": {"user_id": "{{input.user_id}}"},
            "max_len": None,
            "approximate_trimming": True,
            "timeout_ms": TIMEOUT_MS,
        },
    )

    def received(_ids: set[str]) -> Counter[str]:
        import redis

        client = redis.Redis.from_url(transport.spec["redis_url"], decode_responses=True)
        try:
            entries: list[tuple[str, dict[str, str]]] = client.xrange(stream)  # type: ignore[assignment]
        finally:
            client.close()
        return Counter(fields["execution_id"] for _, fields in entries)

    transport.received = received
    return transport


def kafka_transport() -> Transport:
    topic = "chaos-" + uuid.uuid4().hex[:8]

    transport = process_transport(
        "KAFKA",
        lambda port: [
            _tansu_binary(),
            "broker",
            "--listener-url",
            f"tcp://127.0.0.1:{port}",
            "--advertised-listener-url",
            f"tcp://127.0.0.1:{port}",
            "--storage-engine",
            "memory://tansu/",
        ],
        lambda port: {
            "bootstrap_servers": f"127.0.0.1:{port}",
            "topic": topic,
            "key_template": "{{input.user_id}}",
            "value_template": {"user_id": "{{input.user_id}}"},
            "headers": {},
            "acks": "all",
            "timeout_ms": TIMEOUT_MS,
        },
    )

    def received(ids: set[str]) -> Counter[str]:
        from kafka import KafkaConsumer

        consumer = KafkaConsumer(
            topic,
            bootstrap_servers=[transport.spec["bootstrap_servers"]],
            auto_offset_reset="earliest",
            consumer_timeout_ms=10000,
        )
        seen: Counter[str] = Counter()
        try:
            for message in consumer:
                headers = dict(message.headers)
                seen[headers["X-Task-Executor-Execution-Id"].decode()] += 1
                if set(seen) >= ids:
                    break
        finally:
            consumer.close()
        return seen

    transport.received = received
    return transport


TRANSPORTS = {"http": http_transport, "redis_stream": redis_transport, "kafka": kafka_transport}


@pytest.fixture(params=sorted(TRANSPORTS))
def transport(request: pytest.FixtureRequest) -> Iterator[tuple[str, Transport]]:
    built = TRANSPORTS[request.param]()
    yield request.param, built
    built.stop()


def attempt_rows(db: Database) -> list[dict[str, Any]]:
    return db.run(
        "SELECT execution_id, attempt_number, status, error ->> 'type' AS error_type, "
        "started_at, completed_at FROM attempts ORDER BY execution_id, attempt_number"
    )


def wait_for_failures(db: Database, stack: Stack, total: int) -> float:
    """Keep the target down until every execution failed once, or MAX_DOWN_S once at least
    one attempt failed (a dead Kafka broker makes attempts slow: wait for the first one,
    up to FIRST_FAILURE_S)."""
    started = time.monotonic()
    while time.monotonic() - started < FIRST_FAILURE_S:
        row = db.run(
            "SELECT count(DISTINCT execution_id) AS executions, count(*) AS attempts "
            "FROM attempts WHERE status = 'FAILED'"
        )[0]
        if row["executions"] >= total:
            break
        if row["attempts"] > 0 and time.monotonic() - started >= MAX_DOWN_S:
            break
        assert all(p.poll() is None for p in stack.procs.values())
        time.sleep(0.1)
    return time.monotonic() - started


def settle(db: Database, stack: Stack, timeout_s: float) -> dict[str, int]:
    deadline = time.monotonic() + timeout_s
    while True:
        counts = status_counts(db)
        if not any(s not in TERMINAL for s in counts):
            return counts
        assert time.monotonic() < deadline, counts
        time.sleep(0.2)


def retry_figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    by_execution: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_execution.setdefault(row["execution_id"], []).append(row)
    gaps = [
        (later["started_at"] - earlier["completed_at"]).total_seconds()
        for attempts in by_execution.values()
        for earlier, later in itertools.pairwise(attempts)
    ]
    failed = [r for r in rows if r["status"] == "FAILED"]
    return {
        "executions_with_failed_attempts": len({r["execution_id"] for r in failed}),
        "failed_attempts": len(failed),
        "error_types": dict(Counter(r["error_type"] for r in failed)),
        "max_attempts_used": max(len(a) for a in by_execution.values()),
        "min_retry_gap_ms": round(min(gaps) * 1000) if gaps else None,
        "success_attempts_per_execution": max(
            sum(r["status"] == "SUCCESS" for r in a) for a in by_execution.values()
        ),
    }


def test_deliveries_resume_when_the_target_comes_back(
    database: Database, db_url: str, transport: tuple[str, Transport], tmp_path: Path
) -> None:
    name, target = transport
    total = chaos_n(1_000)
    if target.endpoint_type != "HTTP":
        target.start()
        target.stop()  # "stopped": it ran, and is gone when the run starts
    seeded = seed(
        database,
        spec=target.spec,
        endpoint_type=target.endpoint_type,
        policy=POLICY,
        inputs=[{"user_id": f"u{i}"} for i in range(total)],
    )
    stack = Stack(db_url, tmp_path)
    started = time.monotonic()
    stack.start("scheduler", "chalicelib.scheduler")
    stack.start("worker", "chalicelib.worker")
    try:
        down_s = wait_for_failures(database, stack, total)
        target.start()
        counts = settle(database, stack, max(300.0, total / 5))
    finally:
        stack.close()
    duration = time.monotonic() - started

    ids = set(seeded.execution_ids)
    received = target.received(ids)
    retries = retry_figures(attempt_rows(database))
    lost = len(ids - set(received)) + (total - counts.get("SUCCESS", 0))
    write_figures(
        f"targets_down_{name}",
        figures(
            created=total,
            delivered=len(ids & set(received)),
            duplicated=sum(n - 1 for n in received.values()),
            lost=lost,
            stuck=sum(n for s, n in counts.items() if s not in TERMINAL),
            duration_s=duration,
            down_s=round(down_s, 1),
            statuses=counts,
            **retries,
        ),
    )

    assert lost == 0, counts
    assert retries["executions_with_failed_attempts"] >= 1, retries
    assert set(retries["error_types"]) <= ERROR_TYPES[target.endpoint_type], retries
    assert retries["max_attempts_used"] <= POLICY["max_attempts"], retries
    assert retries["min_retry_gap_ms"] >= MIN_GAP_S * 1000, retries
    assert retries["success_attempts_per_execution"] == 1, retries
