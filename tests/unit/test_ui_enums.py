"""The dashboard's filter choices are the service's enumerations, value for value."""

from __future__ import annotations

import re

from chalicelib.api.ui import UI_DIR
from chalicelib.db.queries import SQL_DIR
from chalicelib.domain.auto_pause import PausedReason
from chalicelib.domain.delivery import DeliveryErrorType
from chalicelib.domain.health import Health
from chalicelib.domain.statuses import ExecutionStatus, JobStatus, TriggerType


def _choices() -> dict[str, list[str]]:
    text = (UI_DIR / "enums.js").read_text(encoding="utf-8")
    arrays = re.findall(r"export const ([A-Z_]+) = \[([^\]]*)\]", text)
    return {name: re.findall(r"'([A-Z_]+)'", body) for name, body in arrays}


def test_status_and_trigger_choices_are_the_enumerations_in_order() -> None:
    choices = _choices()
    assert choices["EXECUTION_STATUSES"] == [s.value for s in ExecutionStatus]
    assert choices["JOB_STATUSES"] == [s.value for s in JobStatus]
    assert choices["TRIGGERS"] == [t.value for t in TriggerType]
    assert choices["HEALTHS"] == [h.value for h in Health]
    assert choices["PAUSED_REASONS"] == [r.value for r in PausedReason]
    text = (UI_DIR / "enums.js").read_text(encoding="utf-8")
    meanings = re.search(r"PAUSED_REASON_TEXT = \{([^}]*)\}", text)
    assert meanings is not None
    assert re.findall(r"^\s*([A-Z_]+):", meanings.group(1), re.M) == choices["PAUSED_REASONS"]


def test_error_type_choices_are_every_type_an_attempt_is_written_with() -> None:
    scheduler = (SQL_DIR / "scheduler.sql").read_text(encoding="utf-8")
    written = re.findall(r"jsonb_build_object\('type', '([A-Z_]+)'", scheduler)
    assert written  # the scheduler's own error types (a reclaimed or poisoned execution)
    expected = [t.value for t in DeliveryErrorType] + written
    assert _choices()["ERROR_TYPES"] == expected
