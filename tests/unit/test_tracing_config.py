"""Which processes trace: the standard OTEL_* variables decide (chalicelib.tracing)."""

from __future__ import annotations

from chalicelib.tracing import Tracing, from_environment


def test_off_unless_an_exporter_is_configured() -> None:
    assert from_environment({}) is None
    assert from_environment({"OTEL_TRACES_EXPORTER": "none"}) is None
    assert from_environment({"OTEL_TRACES_EXPORTER": "no-such-exporter"}) is None
    disabled = {"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"}
    assert from_environment(disabled) is None


def test_an_exporter_named_by_otel_traces_exporter_turns_it_on() -> None:
    assert isinstance(from_environment({"OTEL_TRACES_EXPORTER": "console"}), Tracing)
