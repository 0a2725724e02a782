"""Aggregates over one series window: avg, nearest-rank percentiles, last, count.

The metric cache computes an `Aggregation` for every query; the NodeMetric
reporter turns them into `aggregatedNodeUsages` and the QoS plugins compare
them with thresholds. Percentiles use the nearest-rank method of Koordinator's
koordlet (`fieldPercentileOfMetricList` in pkg/koordlet/metriccache/util.go):
sort ascending and take index ``max(int(n * p) - 1, 0)``. Koordlet multiplies
in float32; for p in {0.5, 0.9, 0.95, 0.99} and every n below 200,000 the
float64 product truncates to the same index (checked exhaustively), far above
the largest series this cache holds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile of non-empty ascending `sorted_values`, p in (0, 1]."""
    return sorted_values[max(int(len(sorted_values) * p) - 1, 0)]


@dataclass(frozen=True, slots=True)
class Aggregation:
    """Aggregates of the samples of one series inside a query window.

    `first_time` and `last_time` are the timestamps of the earliest and the
    latest sample found, so callers can apply the cold-start rule ("an
    aggregate whose samples cover less than half of its window is left
    empty") with `covers`.
    """

    avg: float
    p50: float
    p90: float
    p95: float
    p99: float
    last: float
    count: int
    first_time: float
    last_time: float

    @property
    def duration(self) -> float:
        """Seconds between the first and the last sample (0 for one sample)."""
        return self.last_time - self.first_time

    def covers(self, window_start: float, window_end: float, fraction: float = 0.5) -> bool:
        """Whether the samples span at least `fraction` of [window_start, window_end]."""
        return self.duration >= fraction * (window_end - window_start)


def aggregate(first_time: float, last_time: float, values: Sequence[float]) -> Aggregation:
    """Aggregate non-empty `values`, given in time order (the last one is `last`)."""
    ordered = sorted(values)
    count = len(ordered)
    return Aggregation(
        avg=math.fsum(ordered) / count,
        p50=percentile(ordered, 0.5),
        p90=percentile(ordered, 0.9),
        p95=percentile(ordered, 0.95),
        p99=percentile(ordered, 0.99),
        last=values[-1],
        count=count,
        first_time=first_time,
        last_time=last_time,
    )
