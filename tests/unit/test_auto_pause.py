"""The rules of endpoints that pause themselves (chalicelib.domain.auto_pause), without a
database or a clock: the field's bounds, what a 410 is, the event, the FAILING judgement."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chalicelib.domain.auto_pause import (
    DEFAULT_AUTO_PAUSE_AFTER_MS,
    PausedReason,
    Watch,
    event,
    is_gone,
    judge,
    parse_auto_pause_after_ms,
)
from chalicelib.domain.jobs import RESERVED_KEY_PREFIXES, pause_event_key
from chalicelib.domain.statuses import AttemptStatus, ExecutionStatus
from chalicelib.errors import ValidationFailed
from chalicelib.worker.models import FinishedExecution

T0 = datetime(2026, 3, 15, 10, 0, tzinfo=UTC)
MINUTE = 60_000


def test_the_field_defaults_to_five_days_and_null_turns_it_off() -> None:
    assert parse_auto_pause_after_ms({}) == DEFAULT_AUTO_PAUSE_AFTER_MS == 432_000_000
    assert parse_auto_pause_after_ms({"auto_pause_after_ms": None}) is None
    assert parse_auto_pause_after_ms({"auto_pause_after_ms": 60_000}) == 60_000
    assert parse_auto_pause_after_ms({"auto_pause_after_ms": 2_592_000_000}) == 2_592_000_000


@pytest.mark.parametrize("value", [59_999, 2_592_000_001, 0, -1, True, 1.5, "60000", [60000]])
def test_a_bad_window_is_refused_naming_the_field(value: Any) -> None:
    with pytest.raises(ValidationFailed, match="'auto_pause_after_ms' must be an integer"):
        parse_auto_pause_after_ms({"auto_pause_after_ms": value})


def test_only_an_http_410_is_gone() -> None:
    assert is_gone("HTTP", {"type": "HTTP_ERROR", "status_code": 410})
    assert not is_gone("HTTP", {"type": "HTTP_ERROR", "status_code": 404})
    assert not is_gone("HTTP", {"type": "TIMEOUT"})
    assert not is_gone("HTTP", None)
    assert not is_gone("KAFKA", {"status_code": 410})
    assert not is_gone("REDIS_STREAM", {"status_code": 410})


def test_the_event_and_its_key() -> None:
    assert event("billing", PausedReason.GONE, "2026-03-15T10:00:00Z") == {
        "type": "endpoint.paused",
        "endpoint": "billing",
        "reason": "GONE",
        "at": "2026-03-15T10:00:00Z",
    }
    key = pause_event_key("billing", T0)
    assert key.startswith(RESERVED_KEY_PREFIXES[-1]) and "billing" in key
    assert key != pause_event_key("billing", T0 + timedelta(microseconds=1))


def _pass(seen: Watch | None, ok: int, bad: int, at: datetime, **kw: Any) -> Any:
    options: dict[str, Any] = {"paused": False, "window_ms": MINUTE, **kw}
    return judge(seen, succeeded=ok, failed=bad, now=at, **options)


def test_failures_alone_for_the_window_pause_once() -> None:
    first = _pass(None, 5, 2, T0)  # first sight: counts only
    assert first.watch == Watch(succeeded=5, failed=2) and not first.pause
    begun = _pass(first.watch, 5, 3, T0 + timedelta(seconds=10))
    assert begun.watch.failing_since == T0 + timedelta(seconds=10) and not begun.pause
    quiet = _pass(begun.watch, 5, 3, T0 + timedelta(days=9))  # not tried: no change
    assert quiet.watch == begun.watch and not quiet.pause
    early = _pass(begun.watch, 5, 4, T0 + timedelta(seconds=69))
    assert not early.pause and early.watch.failing_since == begun.watch.failing_since
    due = _pass(early.watch, 5, 5, T0 + timedelta(seconds=70))
    assert due.pause and due.watch == Watch(succeeded=5, failed=5)  # a new stretch next


def test_a_success_a_pause_or_a_null_window_ends_the_stretch() -> None:
    failing = Watch(succeeded=1, failed=9, failing_since=T0)
    later = T0 + timedelta(hours=1)
    assert _pass(failing, 2, 12, later).watch.failing_since is None
    assert not _pass(failing, 2, 12, later).pause
    assert _pass(failing, 1, 12, later, paused=True) == _pass(None, 1, 12, later)
    assert not _pass(failing, 1, 12, later, window_ms=None).pause
    assert _pass(failing, 1, 3, later).watch.failing_since is None  # counts went back


def test_a_410_recorded_as_unprocessable_pauses_nothing() -> None:
    """A result whose record was refused is written again as UNPROCESSABLE with nothing but
    the record: what failed may have been the pause (or its operator event)."""
    gone = FinishedExecution(
        execution_id="exec_1",
        endpoint="billing",
        attempt_number=1,
        attempt_status=AttemptStatus.FAILED,
        next_status=ExecutionStatus.RETRYING,
        started_at=T0,
        completed_at=T0,
        duration_ms=3,
        error={"type": "HTTP_ERROR", "status_code": 410},
        gone=True,
    )
    assert not gone.unprocessable("refused").gone
