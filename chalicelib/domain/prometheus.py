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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_KINDS = frozenset({"counter", "gauge", "summary", "histogram", "untyped"})

#: A sample: its label values, in the order of its family's ``labels``, then its value.
Sample = Sequence[Any]


@dataclass(frozen=True, kw_only=True)
class Family:
    """A metric family: its HELP and TYPE lines, its label names, and its samples.

    A scrape renders a few samples per endpoint (thousands at a few hundred endpoints),
    so a family names its labels once and each sample is a plain row (label values, then
    the value): a row straight from the database needs no object of its own, and every
    line is rendered from one template (:func:`render`)."""

    name: str
    help: str
    kind: str
    labels: tuple[str, ...] = ()
    samples: Sequence[Sample] = ()

    def __post_init__(self) -> None:
        if not _METRIC_NAME.match(self.name):
            raise ValueError(f"invalid metric name {self.name!r}")
        if self.kind not in _KINDS:
            raise ValueError(f"invalid metric type {self.kind!r}")
        bad = [k for k in self.labels if not _LABEL_NAME.match(k) or k.startswith("__")]
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


def _lines(family: Family) -> list[str]:
    """One line per sample, from a template of the family's name and label names (checked
    against the grammar, so they hold no ``%``); a sample of the wrong length raises."""
    labels = family.labels
    head = family.name
    if labels:
        head += "{" + ",".join(f'{k}="%s"' for k in labels) + "}"
    template = head + " %s"
    lv, fv = _label_value, format_value
    samples = family.samples
    if len(labels) == 0:
        return [template % fv(v) for (v,) in samples]
    if len(labels) == 1:
        return [template % (lv(a), fv(v)) for a, v in samples]
    if len(labels) == 2:
        return [template % (lv(a), lv(b), fv(v)) for a, b, v in samples]
    return [template % (*map(lv, sample[:-1]), fv(sample[-1])) for sample in samples]


def render(families: Iterable[Family]) -> str:
    """The exposition text of ``families``, in order, ending with a line feed; a label
    value is escaped only when it holds a character that needs it."""
    lines: list[str] = []
    for family in families:
        lines.append(f"# HELP {family.name} {escape_help(family.help)}")
        lines.append(f"# TYPE {family.name} {family.kind}")
        lines.extend(_lines(family))
    return "\n".join(lines) + "\n"


def gauge(
    name: str, help_text: str, samples: Sequence[Sample], labels: tuple[str, ...] = ()
) -> Family:
    """A gauge; ``samples`` are rows of ``labels``' values, then the value."""
    return Family(name=name, help=help_text, kind="gauge", labels=labels, samples=samples)


def counter(
    name: str, help_text: str, samples: Sequence[Sample], labels: tuple[str, ...] = ()
) -> Family:
    """A counter named ``name`` + ``_total``: in the 0.0.4 text format the HELP and TYPE
    lines carry the sample's full name (as prometheus_client writes them)."""
    return Family(
        name=name + "_total", help=help_text, kind="counter", labels=labels, samples=samples
    )


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
