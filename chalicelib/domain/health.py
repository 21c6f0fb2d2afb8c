"""Health: one definition for a job (``GET /jobs/{id}/status``) and an endpoint (the
overview, the endpoint list and page), so every view that shows a health agrees.

What is counted: executions of the last :data:`WINDOW` (24 hours), by outcome. Each read
is bounded whatever the traffic, so the two subjects read them from different places:

* a job: its executions created in the window, the newest 10,000 (jobs_window_stats);
* an endpoint: its executions that ended in the window, from the summary rows every
  finalize adds to (delivery_counts), plus those live now.

For executions delivered when they are due (the rule), both judge the same executions; an
execution created before the window and ending inside it counts for its endpoint only, and
a cancelled one counts in its job's total, not its endpoint's.
The thresholds are the job status's:

* IDLE: nothing in the window.
* The failure ratio is ``failed / (succeeded + failed)``: only finished executions count;
  CANCELLED and in-flight ones are neither successes nor failures. Executions, not
  attempts: a delivery that succeeded on its third attempt is one success.
* FAILING when the ratio is >= 50 %, DEGRADED when >= 10 %, HEALTHY otherwise (including
  a window whose executions have not finished yet).
"""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum

#: Executions created this long before "now" count towards a health.
WINDOW = timedelta(hours=24)
DEGRADED_RATIO = 0.10
FAILING_RATIO = 0.50


class Health(StrEnum):
    """How a job or an endpoint has been doing over the last 24 hours."""

    HEALTHY = "HEALTHY"  #: failure ratio below DEGRADED_RATIO (or nothing finished yet)
    DEGRADED = "DEGRADED"  #: failure ratio >= DEGRADED_RATIO and < FAILING_RATIO
    FAILING = "FAILING"  #: failure ratio >= FAILING_RATIO
    IDLE = "IDLE"  #: no execution created in the window


def compute_health(*, total: int, succeeded: int, failed: int) -> Health:
    """Health from the window's execution counts (``total`` includes unfinished ones)."""
    if total == 0:
        return Health.IDLE
    finished = succeeded + failed
    if finished == 0:
        return Health.HEALTHY
    ratio = failed / finished
    if ratio >= FAILING_RATIO:
        return Health.FAILING
    if ratio >= DEGRADED_RATIO:
        return Health.DEGRADED
    return Health.HEALTHY
