"""Pure parts of the scheduler: tick plans, keys, statuses, region hook, Lambda margins."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from chalicelib.db.queries import REGION_MARKER as MARKER
from chalicelib.db.queries import load_queries, regional
from chalicelib.domain.regions import ALL_REGIONS, RegionFilter
from chalicelib.domain.statuses import promotion_sources
from chalicelib.scheduler.lambdas import deadline_margin, time_left_of
from chalicelib.scheduler.loops import LOOP_NAMES
from chalicelib.scheduler.materializer import (
    DueJob,
    TickAction,
    TickPlan,
    cron_idempotency_key,
    plan_tick,
)
from chalicelib.scheduler.reclaimer import RECLAIMABLE_STATUSES
from chalicelib.settings import Settings
from chalicelib.wiring.scheduler import build_loop

T = datetime(2026, 3, 16, 9, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def due_job(**overrides: object) -> DueJob:
    fields: dict[str, object] = {
        "job_id": "job_1",
        "expression": "* * * * *",
        "zone": ZoneInfo("UTC"),
        "starts_at": None,
        "ends_at": None,
        "next_run_at": T,
    }
    fields.update(overrides)
    return DueJob(**fields)  # type: ignore[arg-type]


def test_a_tick_is_materialized_and_the_next_computed_from_it() -> None:
    assert plan_tick(due_job(), T) == TickPlan(TickAction.MATERIALIZE, T, T + MINUTE)


def test_the_last_tick_before_ends_at_moves_to_ends_at_the_retirement_tick() -> None:
    job = due_job(ends_at=T + timedelta(seconds=30))
    assert plan_tick(job, T) == TickPlan(TickAction.MATERIALIZE, T, T + timedelta(seconds=30))


@pytest.mark.parametrize("ends_at", [T, T - MINUTE])
def test_a_tick_at_or_after_ends_at_exhausts_the_job(ends_at: datetime) -> None:
    assert plan_tick(due_job(ends_at=ends_at), T) == TickPlan(TickAction.EXHAUST, T, None)


def test_a_tick_before_starts_at_skips_to_the_first_tick_after_it() -> None:
    job = due_job(starts_at=T + timedelta(minutes=2, seconds=1))
    assert plan_tick(job, T) == TickPlan(TickAction.SKIP_TO_START, T, T + 3 * MINUTE)
    ended = due_job(starts_at=T + 2 * MINUTE, ends_at=T + 2 * MINUTE)
    assert plan_tick(ended, T) == TickPlan(TickAction.SKIP_TO_START, T, T + 2 * MINUTE)


def test_a_tick_at_starts_at_is_materialized() -> None:
    assert plan_tick(due_job(starts_at=T), T).action is TickAction.MATERIALIZE


def test_idempotency_key_is_cron_job_id_epoch_ms() -> None:
    assert cron_idempotency_key("job_abc", T) == "cron_job_abc_1773651600000"
    millis = T + timedelta(milliseconds=7)
    assert cron_idempotency_key("job_abc", millis) == "cron_job_abc_1773651600007"


def test_statuses_in_the_sql_match_the_transition_table() -> None:
    assert promotion_sources() == ["PENDING"]  # FAILED -> QUEUED is an operator's, never a loop's
    assert RECLAIMABLE_STATUSES == ["RUNNING"]
    queries = load_queries()
    assert "WHERE status = 'PENDING'" in queries["scheduler_promote_due"].sql
    assert "WHERE status = 'RUNNING'" in queries["scheduler_reclaim_stuck"].sql


@pytest.mark.parametrize(
    "name", ["scheduler_cron_due_jobs", "scheduler_promote_due", "scheduler_reclaim_stuck"]
)
def test_region_filter_hook(name: str) -> None:
    query = load_queries()[name]
    assert regional(query, ALL_REGIONS) == (query.sql.replace(MARKER, "TRUE"), {})
    sql, params = regional(query, RegionFilter(("default", "ap-south-2")))
    assert "crdb_region = ANY(:regions)" in sql and MARKER not in sql
    assert params == {"regions": ["default", "ap-south-2"]}


def test_region_filter_hook_needs_its_marker() -> None:
    with pytest.raises(ValueError, match="marker"):
        regional(load_queries()["scheduler_cron_apply_ticks"], ALL_REGIONS)


class FakeContext:
    def __init__(self, remaining_ms: float) -> None:
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> float:
        return self.remaining_ms


@pytest.mark.parametrize(
    ("initial_sec", "margin"), [(70.0, 5.0), (10.0, 2.0), (3.0, 0.6), (1.0, 0.5), (0.2, 0.5)]
)
def test_lambda_margin_is_a_fifth_of_the_time_within_bounds(
    initial_sec: float, margin: float
) -> None:
    assert deadline_margin(initial_sec) == pytest.approx(margin)


def test_time_left_follows_the_context() -> None:
    context = FakeContext(70_000)
    time_left = time_left_of(context)
    assert time_left() == pytest.approx(65.0)
    context.remaining_ms = 5_000
    assert time_left() == pytest.approx(0.0)


def test_loops_take_their_intervals_from_settings() -> None:
    settings = Settings(cron_tick_interval_sec=2.0, promote_interval_ms=250, reclaim_interval_sec=7)
    specs = {
        name: build_loop(name, settings, None, lambda: T, lambda: ALL_REGIONS)  # type: ignore[arg-type]
        for name in LOOP_NAMES
    }
    assert {n: s.interval_sec for n, s in specs.items()} == {
        "cron_materializer": 2.0,
        "delayed_promoter": 0.25,
        "stuck_reclaimer": 7,
        "housekeeper": 60.0,
        "bulk_operator": 1.0,
    }
    assert {s.metric_event for s in specs.values()} == {
        "cron_ticks_materialized",
        "delayed_promoted",
        "reclaimed",
        "history_purged",
        "bulk_page",
    }
    with pytest.raises(ValueError, match="unknown"):
        build_loop("nope", settings, None, lambda: T, lambda: ALL_REGIONS)  # type: ignore[arg-type]
