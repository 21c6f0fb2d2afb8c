"""Where chaos tests write their figures: ``bench/results/chaos/<name>.json``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "chaos"


def chaos_n(default: int) -> int:
    """How many executions a run creates: ``TE_CHAOS_N`` (quick runs) or the issue's figure."""
    return int(os.environ.get("TE_CHAOS_N", default))


def write_figures(name: str, figures: dict[str, Any]) -> Path:
    """Write one test's figures (``created, delivered, duplicated, lost, stuck, duration_s``)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path
