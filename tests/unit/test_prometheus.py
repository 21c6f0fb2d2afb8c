"""The exposition renderer (chalicelib.domain.prometheus) read back by prometheus_client's
own parser: escaping, special values, names the format refuses."""

from __future__ import annotations

import math

import pytest
from prometheus_client.parser import text_string_to_metric_families

from chalicelib.domain import prometheus as prom
from chalicelib.domain.prometheus import Sample


def test_label_values_and_help_survive_the_real_parser() -> None:
    hostile = 'a"b\\c\nd}{,="'
    text = prom.render(
        [
            prom.gauge(
                "te_x", "help with \\ and\nnewline", [Sample(value=2, labels={"l": hostile})]
            ),
            prom.counter("te_y", "a counter", [Sample(value=1.5, labels={"k": "v"})]),
        ]
    )
    families = {f.name: f for f in text_string_to_metric_families(text)}
    [sample] = families["te_x"].samples
    assert sample.labels == {"l": hostile} and sample.value == 2
    assert families["te_x"].documentation == "help with \\ and\nnewline"
    assert families["te_y"].type == "counter"
    assert families["te_y"].samples[0].name == "te_y_total"


def test_special_values_are_written_as_the_format_spells_them() -> None:
    values = [math.nan, math.inf, -math.inf, 3, 0.25]
    text = prom.render(
        [
            prom.gauge(
                "te_v", "v", (Sample(value=v, labels={"i": str(i)}) for i, v in enumerate(values))
            )
        ]
    )
    assert 'te_v{i="0"} NaN' in text and "+Inf" in text and "-Inf" in text
    assert 'te_v{i="3"} 3\n' in text
    parsed = [s.value for s in next(iter(text_string_to_metric_families(text))).samples]
    assert math.isnan(parsed[0]) and parsed[1:] == values[1:]


@pytest.mark.parametrize(
    ("name", "labels"),
    [("te-bad", {}), ("1te", {}), ("te_ok", {"bad-label": "x"}), ("te_ok", {"__reserved": "x"})],
)
def test_names_outside_the_grammar_are_refused(name: str, labels: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="invalid"):
        prom.gauge(name, "h", [Sample(value=1, labels=labels)])


def test_an_unknown_type_is_refused() -> None:
    with pytest.raises(ValueError, match="type"):
        prom.Family(name="te_x", help="h", kind="meter", samples=())
