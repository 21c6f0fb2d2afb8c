"""The Prometheus text exposition format (version 0.0.4), rendered from plain values.

Why not ``prometheus_client``: the Lambda package is at its 8 MiB limit and ``import app``
at its cold-start budget (README, ``make bench-package``), and the API needs only the
renderer, not the client's registries, collectors and HTTP servers. This module is that
renderer: metric families in, text out, with the format's escaping rules:

* label values escape backslash, double quote and line feed (``\\\\``, ``\\"``, ``\\n``);
* HELP text escapes backslash and line feed;
* values are Go-style floats: ``NaN``, ``+Inf``, ``-Inf``, integers without a fraction.

Names are checked against the format's grammar, so a bad name fails here, not in a scraper.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_KINDS = frozenset({"counter", "gauge", "summary", "histogram", "untyped"})
_NO_LABELS: Mapping[str, str] = MappingProxyType({})


class Sample(NamedTuple):
    """One line: the family's name plus ``suffix`` (``_total``, ``_sum``...), labels, value.

    A named tuple, not a dataclass: a scrape builds one per series (thousands at a few
    hundred endpoints), and a frozen dataclass' constructor costs three times as much."""

    value: float
    labels: Mapping[str, str] = _NO_LABELS
    suffix: str = ""


@dataclass(frozen=True, kw_only=True)
class Family:
    """A metric family: its HELP and TYPE lines and its samples."""

    name: str
    help: str
    kind: str
    samples: tuple[Sample, ...]

    def __post_init__(self) -> None:
        if not _METRIC_NAME.match(self.name):
            raise ValueError(f"invalid metric name {self.name!r}")
        if self.kind not in _KINDS:
            raise ValueError(f"invalid metric type {self.kind!r}")
        # A family's samples share a few suffixes and label sets: each is checked once.
        for suffix in {sample.suffix for sample in self.samples}:
            if not _METRIC_NAME.match(self.name + suffix):
                raise ValueError(f"invalid sample name {self.name + suffix!r}")
        for names in {tuple(sample.labels) for sample in self.samples}:
            bad = [k for k in names if not _LABEL_NAME.match(k) or k.startswith("__")]
            if bad:
                raise ValueError(f"invalid label name(s) {bad!r}")


def escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    if type(value) is int and abs(value) < 2**53:  # most samples: counts
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


def _label_value(value: object) -> str:
    text = str(value)
    if "\\" in text or '"' in text or "\n" in text:
        return escape_label_value(text)
    return text


def _labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    return "{" + ",".join([f'{k}="{_label_value(v)}"' for k, v in labels.items()]) + "}"


def render(families: Iterable[Family]) -> str:
    """The exposition text of ``families``, in order, ending with a line feed. A scrape
    renders a few samples per endpoint (thousands at a few hundred endpoints), so each
    line is one f-string, and a label value is escaped only when it holds a character
    that needs it."""
    lines: list[str] = []
    for family in families:
        lines.append(f"# HELP {family.name} {escape_help(family.help)}")
        lines.append(f"# TYPE {family.name} {family.kind}")
        lines.extend(
            [
                f"{family.name}{sample.suffix}{_labels(sample.labels)} {format_value(sample.value)}"
                for sample in family.samples
            ]
        )
    return "\n".join(lines) + "\n"


def gauge(name: str, help_text: str, samples: Iterable[Sample]) -> Family:
    return Family(name=name, help=help_text, kind="gauge", samples=tuple(samples))


def counter(name: str, help_text: str, samples: Iterable[Sample]) -> Family:
    """A counter named ``name`` + ``_total``: in the 0.0.4 text format the HELP and TYPE
    lines carry the sample's full name (as prometheus_client writes them)."""
    return Family(name=name + "_total", help=help_text, kind="counter", samples=tuple(samples))


def bucket_quantile(
    q: float, bounds: Sequence[float], cumulative: Sequence[int], total: int
) -> float | None:
    """The ``q`` quantile estimated from histogram buckets, as Prometheus'
    ``histogram_quantile`` does: ``cumulative[i]`` observations were at most ``bounds[i]``
    (of ``total``); linear within the bucket the rank falls in, from 0 for the first. A
    rank past the last bound is reported as that bound (the histogram cannot say more).
    None when there is nothing to estimate from."""
    if total <= 0:
        return None
    rank = q * total
    lower, below = 0.0, 0
    for bound, count in zip(bounds, cumulative, strict=True):
        if count >= rank:
            inside = count - below
            if inside <= 0:
                return float(bound)
            return lower + (bound - lower) * (rank - below) / inside
        lower, below = float(bound), count
    return float(bounds[-1])
