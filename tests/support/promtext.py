"""GET /metrics captured from a running stack, as a ``promtool test rules`` input.

A Prometheus server scrapes a target every interval, adds the target's labels (``job``,
``instance``) to each sample and records ``up`` (1 when the scrape answered 200, else 0);
a rule evaluated at a moment reads each series' latest sample. :class:`Recording` does the
same with a real stack: :meth:`Recording.scrape` waits for the next tick of its grid
(every ``interval_sec`` from the first scrape), fetches the text and parses each line
``name{label="value",...} value`` (with prometheus_client's parser of the text format,
as a server would). :meth:`Recording.timeline` lays the captures on that grid, one slot per
interval, ``None`` where a series was not in a scrape (promtool's ``_``), and continues it
past the last capture for as long as the rules need to decide:

* the stack is left as it was: every series holds its last captured value (a killed
  process stays dead, nothing restarts it), except
* the ``ageing`` series (lags: seconds since the oldest due work's time), which grow by
  the interval at each slot while above 0, as a lag does while nothing picks the work up
  (a 0 means nothing is due, and stays 0). The test that uses this asserts that the
  captured lag did grow with the wall clock, so the continuation is what the captures show.

:func:`run_rule_test` writes the test file and runs promtool on it.
"""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

#: A series: its sample name and its labels, sorted.
Key = tuple[str, tuple[tuple[str, str], ...]]


def key(name: str, **labels: str) -> Key:
    """The :data:`Key` of ``name{labels}``."""
    return name, tuple(sorted(labels.items()))


def parse(text: str, target: Mapping[str, str]) -> dict[Key, float]:
    """Every sample of one exposition, with the target's labels added as a server does."""
    samples: dict[Key, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[key(sample.name, **{**sample.labels, **target})] = float(sample.value)
    return samples


@dataclass(frozen=True)
class Capture:
    """One scrape: its slot on the grid, whether it answered 200, its samples."""

    slot: int
    up: bool
    samples: Mapping[Key, float]


@dataclass
class Timeline:
    """Every series' value at each slot (``None``: no sample), ``interval_sec`` apart."""

    interval_sec: float
    target: Mapping[str, str]
    values: dict[Key, list[float | None]]
    captured_slots: int  #: slots 0 .. captured_slots - 1 come from captures; the rest continue

    @property
    def slots(self) -> int:
        return len(next(iter(self.values.values())))

    def at(self, slot: int) -> float:
        """The time of ``slot`` in seconds from the first scrape."""
        return slot * self.interval_sec

    def first_slot(self, series: Key, holds: Callable[[float], bool]) -> int | None:
        """The first slot whose value of ``series`` satisfies ``holds``."""
        for slot, value in enumerate(self.values[series]):
            if value is not None and holds(value):
                return slot
        return None

    def input_series(self) -> list[dict[str, str]]:
        """promtool's ``input_series``: one value (or ``_``) per slot of every series."""
        return [
            {"series": selector(name, dict(labels)), "values": " ".join(map(_value, values))}
            for (name, labels), values in self.values.items()
        ]


@dataclass
class Recording:
    """Scrapes of one target on a grid of ``interval_sec``; ``clock`` and ``sleep`` are
    injected (a test of this module runs them without waiting)."""

    interval_sec: float
    target: Mapping[str, str]
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    captures: list[Capture] = field(default_factory=list)
    _start: float | None = None

    def scrape(self, fetch: Callable[[], tuple[int, str]]) -> Capture:
        """Wait for the next slot, then ``fetch()`` (status, body) and record it there."""
        if self._start is None:
            self._start = self.clock()
        else:
            due = self._start + (self.captures[-1].slot + 1) * self.interval_sec
            self.sleep(max(0.0, due - self.clock()))
        slot = round((self.clock() - self._start) / self.interval_sec)
        status, body = fetch()
        samples = parse(body, self.target) if status == 200 else {}
        capture = Capture(slot=slot, up=status == 200, samples=samples)
        self.captures.append(capture)
        return capture

    def timeline(self, *, until_sec: float, ageing: Collection[str] = ()) -> Timeline:
        """The captures on the grid, continued up to ``until_sec`` (the module docstring
        says how); ``up`` is one more series."""
        assert self.captures, "nothing was scraped"
        captured = self.captures[-1].slot + 1
        total = max(captured, math.floor(until_sec / self.interval_sec) + 1)
        up = key("up", **self.target)
        series = list(dict.fromkeys(k for c in self.captures for k in c.samples))
        values: dict[Key, list[float | None]] = {k: [None] * total for k in [*series, up]}
        for capture in self.captures:
            for k, value in capture.samples.items():
                values[k][capture.slot] = value
            values[up][capture.slot] = 1.0 if capture.up else 0.0
        after = range(1, total - captured + 1)
        for (name, _), row in values.items():
            last = row[captured - 1]
            if last is not None and last > 0 and name in ageing:
                row[captured:] = [last + step * self.interval_sec for step in after]
            else:
                row[captured:] = [last for _ in after]
        return Timeline(self.interval_sec, self.target, values, captured)


def selector(name: str, labels: Mapping[str, str]) -> str:
    """``name{a="1",b="2"}`` with the text format's escapes."""
    inner = ",".join(f"{k}={_quoted(v)}" for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


def _quoted(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _value(value: float | None) -> str:
    if value is None:
        return "_"
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Inf" if value > 0 else "-Inf"
    return repr(value)


def duration_sec(text: str) -> float:
    """A Prometheus duration of one unit (``30s``, ``2m``, ``1h``) in seconds."""
    units = {"s": 1, "m": 60, "h": 3600}
    return float(text[:-1]) * units[text[-1]]


def alert_rules(path: Path) -> dict[str, dict[str, Any]]:
    """The alerting rules of a rules file, by alert name."""
    groups = yaml.safe_load(path.read_text())["groups"]
    return {rule["alert"]: rule for group in groups for rule in group["rules"] if "alert" in rule}


def promtool() -> str:
    """promtool from PATH, else the one ``make promtool`` put beside the venv's python."""
    found = shutil.which("promtool") or str(Path(sys.executable).parent / "promtool")
    assert Path(found).is_file(), "promtool is missing: run `make promtool`"
    return found


#: One expectation: (eval time, alert name, the alerts expected firing then).
Check = tuple[str, str, Sequence[Mapping[str, Any]]]


def run_rule_test(
    path: Path, rules: Path, timeline: Timeline, checks: Sequence[Check]
) -> tuple[bool, str]:
    """Write a ``promtool test rules`` file at ``path`` (rules evaluated every interval of
    the timeline) and run it: (passed, promtool's output)."""
    interval = f"{timeline.interval_sec:g}s"
    test = {
        "rule_files": [str(rules)],
        "evaluation_interval": interval,
        "tests": [
            {
                "interval": interval,
                "input_series": timeline.input_series(),
                "alert_rule_test": [
                    {"eval_time": at, "alertname": name, "exp_alerts": list(expected)}
                    for at, name, expected in checks
                ],
            }
        ],
    }
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    done = subprocess.run(
        [promtool(), "test", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.returncode == 0, done.stdout + done.stderr
