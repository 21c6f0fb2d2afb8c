"""Print the chaos figures as one table (``make chaos`` runs this after the tests).

Every ``bench/results/chaos/<test>.json`` is one row: the common columns of the fault runs
(``created, delivered, duplicated, lost, stuck, duration_s``; empty for the fuzz run) and a
``details`` column with each run's own figures (kills, 40001 retries, recovery time, error
types, requests...), scalars only, in the order :data:`DETAILS` lists them.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from tests.chaos.figures import RESULTS

COLUMNS = ("created", "delivered", "duplicated", "lost", "stuck", "duration_s")
#: The figures shown in ``details``, first those that say most; other scalars follow.
DETAILS = (
    "requests",
    "server_errors",
    "nonconforming",
    "kills",
    "in_flight_at_kills",
    "kill_rounds",
    "sessions_terminated",
    "baseline_per_s",
    "down_s",
    "recovered_s",
    "api_recovered_s",
    "jobs",
    "schedulers",
    "workers",
    "caught_up_s",
    "serialization_failures_40001",
    "xact_rollback_delta",
    "attempts",
    "executions_with_failed_attempts",
    "failed_attempts",
    "error_types",
    "max_attempts_used",
    "min_retry_gap_ms",
)
#: Long or nested figures left to the JSON file.
HIDDEN = frozenset({*COLUMNS, "statuses", "failures", "by_status", "api_replies"})


def _row(cells: list[str], widths: list[int]) -> str:
    pairs = enumerate(zip(cells, widths, strict=True))
    return "  ".join(c.rjust(w) if 0 < i <= len(COLUMNS) else c.ljust(w) for i, (c, w) in pairs)


def _value(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{v}" for k, v in value.items()) + "}"
    return str(value)


def details(figures: dict[str, Any]) -> str:
    """``name=value`` pairs of the run's own figures (flat dicts inline, lists left out)."""
    ordered = [k for k in DETAILS if k in figures]
    ordered += sorted(k for k in figures if k not in DETAILS and k not in HIDDEN)
    shown = [k for k in ordered if k not in HIDDEN and not isinstance(figures[k], list)]
    flat = [k for k in shown if not isinstance(figures[k], dict) or _is_flat(figures[k])]
    return " ".join(f"{k}={_value(figures[k])}" for k in flat)


def _is_flat(value: dict[str, Any]) -> bool:
    return all(not isinstance(v, dict | list) for v in value.values())


def table(rows: list[tuple[str, dict[str, Any]]]) -> str:
    """One line per run: test, the common columns, details."""
    header = ["test", *COLUMNS, "details"]
    cells = [header] + [
        [name, *(str(d.get(c, "")) for c in COLUMNS), details(d)] for name, d in rows
    ]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    widths[-1] = 0  # the last column is not padded
    return "\n".join(_row(r, widths).rstrip() for r in cells)


def main() -> int:
    files = sorted(RESULTS.glob("*.json"))
    if not files:
        print(f"no figures in {RESULTS}")
        return 0
    loaded = [(f.stem, json.loads(f.read_text(encoding="utf-8"))) for f in files]
    print(f"\nChaos figures ({RESULTS}):\n")
    print(table(loaded) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
