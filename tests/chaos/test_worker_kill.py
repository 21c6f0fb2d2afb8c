"""Fault 1: the worker SIGKILLed every few seconds and restarted.

10,000 IMMEDIATE executions (``TE_CHAOS_N`` for a quick run) are delivered by
``python -m chalicelib.worker`` while a ``python -m chalicelib.scheduler`` reclaims what each
killed worker held (lease ``TE_STUCK_EXECUTION_TIMEOUT_SEC=5``, checked every second).

* HTTP target: every execution ends SUCCESS and reached the target (0 lost, 0 stuck);
  duplicates (same ``X-Task-Executor-Execution-Id`` received twice) are at most the work in
  flight at the kills, and at most ``TE_WORKER_MAX_CONCURRENT`` per kill (a worker sends no
  more than that until their attempts are recorded): at-least-once, detectable by the
  receiver.
* Redis Stream target: the same kills produce 0 duplicate entries (exactly-once).
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from chalicelib.db.connection import Database
from chalicelib.settings import Settings
from tests.chaos.figures import chaos_n, write_figures
from tests.chaos.harness import (
    KillReport,
    Stack,
    figures,
    kill_worker_until_done,
    status_counts,
)
from tests.support.seed.worker import http_spec, retry_policy, seed
from tests.support.served import HttpTarget

pytestmark = pytest.mark.chaos

# Seconds between kills (random in the range): a worker claims within ~1 s of starting.
KILL_EVERY_S = (1.0, 3.0)
# Enough attempts that an execution killed several times in a row is still retried.
POLICY = retry_policy(max_attempts=20)
EXECUTION_HEADER = "x-task-executor-execution-id"
#: The workers' TE_WORKER_MAX_CONCURRENT (the default): the bound on duplicates per kill.
MAX_CONCURRENT = Settings().worker_max_concurrent


def _inputs(n: int) -> list[dict[str, str]]:
    return [{"user_id": f"u{i}"} for i in range(n)]


def _run_with_kills(db: Database, stack: Stack, total: int) -> tuple[float, KillReport]:
    started = time.monotonic()
    stack.start("scheduler", "chalicelib.scheduler")
    stack.start("worker", "chalicelib.worker")
    try:
        kills = kill_worker_until_done(
            stack,
            db,
            every_s=KILL_EVERY_S,
            keep_killing=lambda counts: counts.get("QUEUED", 0) > 0,
            timeout_s=max(600.0, total / 5),
        )
    finally:
        stack.close()
    return time.monotonic() - started, kills


def _account(
    name: str,
    database: Database,
    ids: set[str],
    seen: Counter[str | None],
    duration: float,
    kills: KillReport,
) -> dict[str, int]:
    """Compare what the target saw (execution id -> count) with the database; write figures."""
    counts = status_counts(database)
    result = {
        "lost": len(ids - set(seen)) + (len(ids) - counts.get("SUCCESS", 0)),
        "duplicated": sum(n - 1 for n in seen.values()),
        "stuck": sum(n for s, n in counts.items() if s not in ("SUCCESS", "FAILED")),
    }
    write_figures(
        name,
        figures(
            created=len(ids),
            delivered=len(ids & set(seen)),
            duration_s=duration,
            kills=kills.kills,
            in_flight_at_kills=kills.in_flight_at_kills,
            statuses=counts,
            **result,
        ),
    )
    return result


def test_http_target_under_worker_kills_loses_nothing(
    database: Database, db_url: str, http_target: HttpTarget, tmp_path: Path
) -> None:
    total = chaos_n(10_000)
    seeded = seed(
        database, spec=http_spec(http_target.url("/hook")), policy=POLICY, inputs=_inputs(total)
    )
    duration, kills = _run_with_kills(database, Stack(db_url, tmp_path), total)

    received = Counter(r.headers.get(EXECUTION_HEADER) for r in http_target.received("/hook"))
    ids = set(seeded.execution_ids)
    result = _account("worker_kill", database, ids, received, duration, kills)

    assert kills.kills >= 1
    assert (result["lost"], result["stuck"]) == (0, 0)
    assert set(received) == ids
    assert result["duplicated"] <= kills.in_flight_at_kills
    assert result["duplicated"] <= MAX_CONCURRENT * kills.kills
    # What a worker holds RUNNING: its capacity, plus one claim batch (itself at most the
    # capacity) claimed into slots whose attempts were being recorded.
    assert max(kills.in_flight_each) <= 2 * MAX_CONCURRENT


def test_redis_stream_under_worker_kills_has_no_duplicates(
    database: Database, db_url: str, redis_url: str, tmp_path: Path
) -> None:
    import redis

    total = chaos_n(10_000)
    stream = "chaos-" + uuid.uuid4().hex[:8]
    spec = {
        "redis_url": redis_url,
        "stream": stream,
        "fields_template": {"user_id": "{{input.user_id}}"},
        "max_len": None,
        "approximate_trimming": True,
        "timeout_ms": 2000,
    }
    seeded = seed(
        database, spec=spec, endpoint_type="REDIS_STREAM", policy=POLICY, inputs=_inputs(total)
    )
    duration, kills = _run_with_kills(database, Stack(db_url, tmp_path), total)

    client = redis.Redis.from_url(redis_url, decode_responses=True)
    raw: list[tuple[str, dict[str, str]]] = client.xrange(stream)  # type: ignore[assignment]
    entries: Counter[str | None] = Counter(fields["execution_id"] for _, fields in raw)
    client.close()
    ids = set(seeded.execution_ids)
    result = _account("worker_kill_redis_stream", database, ids, entries, duration, kills)

    assert kills.kills >= 1
    assert (result["lost"], result["stuck"], result["duplicated"]) == (0, 0, 0)
    assert set(entries) == ids
