"""Throughput from periodic samples of "executions finished so far" (1-s buckets)."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

#: A bucket counts as recovered at this share of the baseline rate: after a fault, throughput
#: must come back to 95 % of what it was before.
RECOVERED_SHARE = 0.95


@dataclass
class Throughput:
    """Samples ``(monotonic seconds, finished count)`` in time order."""

    times: list[float] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)

    def add(self, at: float, finished: int) -> None:
        self.times.append(at)
        self.counts.append(finished)

    def finished_at(self, at: float) -> int:
        """The count of the last sample taken at or before ``at`` (0 before the first)."""
        index = bisect.bisect_right(self.times, at) - 1
        return self.counts[index] if index >= 0 else 0

    def rate(self, start: float, end: float) -> float:
        """Executions finished per second between two instants."""
        return (self.finished_at(end) - self.finished_at(start)) / (end - start)

    def buckets(self, start: float, total: int) -> list[int]:
        """Whole 1-s buckets from ``start`` until the last sample or the run's completion.

        A bucket in which the run finished is left out: it is short of work, not slow.
        """
        out: list[int] = []
        second = start
        while second + 1 <= self.times[-1]:
            done_before, done_after = self.finished_at(second), self.finished_at(second + 1)
            if done_after >= total:
                break
            out.append(done_after - done_before)
            second += 1
        return out


def seconds_to_recover(buckets: list[int], baseline: float) -> int | None:
    """Seconds until the end of the first bucket at >= 95 % of ``baseline`` (None: never)."""
    for index, count in enumerate(buckets):
        if count >= RECOVERED_SHARE * baseline:
            return index + 1
    return None
