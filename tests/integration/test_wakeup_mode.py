"""TE_WAKEUP_NOTIFY reaches every NOTIFY publisher from the settings it is built with.

``db/notify.py`` reads no settings (``db/`` knows neither settings nor wiring): the mode is
handed to the publishers by whoever builds them. These tests go through those builders,
the scheduler's :func:`build_loop` and POST /jobs, and listen on a real connection.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from chalicelib.db import notify
from chalicelib.db.connection import ConnectionParams, Database
from chalicelib.domain.regions import ALL_REGIONS
from chalicelib.scheduler.names import CRON_MATERIALIZER, DELAYED_PROMOTER
from chalicelib.settings import Settings
from chalicelib.wiring.scheduler import build_loop
from tests.support.api_client import ApiClient
from tests.support.clock import FakeClock
from tests.support.seed import jobs as f
from tests.support.seed.scheduler import (
    T0,
    seed_cron_job,
    seed_endpoint,
    seed_execution,
    seed_one_shot_job,
)

MODES = [("off", []), ("on", [notify.CHANNEL])]


@contextmanager
def listening(db_url: str) -> Iterator[Callable[[], list[str]]]:
    """A LISTENing connection; the callable returns the channels heard so far."""
    conn = ConnectionParams.from_url(db_url).connect()
    try:
        conn.run(f"LISTEN {notify.CHANNEL}")

        def heard() -> list[str]:
            conn.run("SELECT 1")  # notifications arrive with the next round trip
            return [n[1] for n in conn.notifications]

        yield heard
    finally:
        conn.close()


@pytest.mark.parametrize(("mode", "expected"), MODES)
def test_the_promoter_follows_the_settings_it_is_built_with(
    database: Database, db_url: str, mode: str, expected: list[str]
) -> None:
    seed_endpoint(database)
    job_id = seed_one_shot_job(database)
    seed_execution(database, job_id=job_id, status="PENDING", run_at=T0)
    settings = Settings(wakeup_notify=mode)
    loop = build_loop(DELAYED_PROMOTER, settings, database, FakeClock(T0), lambda: ALL_REGIONS)
    with listening(db_url) as heard:
        assert loop.iteration().count == 1
        assert heard() == expected


@pytest.mark.parametrize(("mode", "expected"), MODES)
def test_the_materializer_follows_the_settings_it_is_built_with(
    database: Database, db_url: str, mode: str, expected: list[str]
) -> None:
    seed_endpoint(database)
    seed_cron_job(database, next_run_at=T0)
    settings = Settings(wakeup_notify=mode)
    loop = build_loop(CRON_MATERIALIZER, settings, database, FakeClock(T0), lambda: ALL_REGIONS)
    with listening(db_url) as heard:
        assert loop.iteration().count == 1
        assert heard() == expected


@pytest.mark.parametrize(("mode", "expected"), MODES)
def test_post_jobs_follows_te_wakeup_notify(
    api: ApiClient,
    database: Database,
    db_url: str,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
    expected: list[str],
) -> None:
    monkeypatch.setenv("TE_WAKEUP_NOTIFY", mode)
    api.restart()
    body = {
        "endpoint": f.welcome_endpoint(database),
        "trigger": "IMMEDIATE",
        "idempotency_key": f"wakeup-{mode}",
        "input": {"user_id": "u_abc", "order_id": "order-1234"},
    }
    with listening(db_url) as heard:
        assert api.post("/jobs", body).status == 201
        assert heard() == expected
