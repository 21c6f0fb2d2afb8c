"""The exposition renderer (chalicelib.domain.prometheus) read back by prometheus_client's
own parser: escaping, special values, names the format refuses."""

from __future__ import annotations

import math

import pytest
from prometheus_client.parser import text_string_to_metric_families

from chalicelib.domain import prometheus as prom


def test_label_values_and_help_survive_the_real_parser() -> None:
    hostile = 'a"b\\c\nd}{,="'
    text = prom.render(
        [
            prom.gauge("te_x", "help with \\ and\nnewline", [(hostile, 2)], ("l",)),
            prom.counter("te_y", "a counter", [("v", 1.5)], ("k",)),
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
        [prom.gauge("te_v", "v", [(str(i), v) for i, v in enumerate(values)], ("i",))]
    )
    assert 'te_v{i="0"} NaN' in text and "+Inf" in text and "-Inf" in text
    assert 'te_v{i="3"} 3\n' in text
    parsed = [s.value for s in next(iter(text_string_to_metric_families(text))).samples]
    assert math.isnan(parsed[0]) and parsed[1:] == values[1:]


@pytest.mark.parametrize(
    ("name", "labels"),
    [("te-bad", ()), ("1te", ()), ("te_ok", ("bad-label",)), ("te_ok", ("__reserved",))],
)
def test_names_outside_the_grammar_are_refused(name: str, labels: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="invalid"):
        prom.gauge(name, "h", [("x",) * len(labels) + (1,)], labels)


@pytest.mark.parametrize("labels", [(), ("a",), ("a", "b"), ("a", "b", "c")])
def test_every_label_count_renders_in_order_and_a_short_sample_raises(
    labels: tuple[str, ...],
) -> None:
    values = tuple(f"v{k}" for k in labels)
    text = prom.render([prom.gauge("te_n", "n", [(*values, 7)], labels)])
    [sample] = next(iter(text_string_to_metric_families(text))).samples
    assert sample.labels == dict(zip(labels, values, strict=True)) and sample.value == 7
    braces = "{" + ",".join(f'{k}="v{k}"' for k in labels) + "}" if labels else ""
    assert text.endswith(f"te_n{braces} 7\n")
    with pytest.raises((TypeError, ValueError)):
        prom.render([prom.gauge("te_n", "n", [values], labels)])


def test_an_unknown_type_is_refused() -> None:
    with pytest.raises(ValueError, match="type"):
        prom.Family(name="te_x", help="h", kind="meter", samples=())
