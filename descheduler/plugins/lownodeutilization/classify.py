"""Node utilization against percentage thresholds: marks, classification, headroom, heat.

Pure maths shared by LowNodeUtilization and HighNodeUtilization (upstream
keeps both in `pkg/framework/plugins/nodeutilization`: `nodeutilization.go`,
`lownodeutilization.go`, `highnodeutilization.go`). "Used" is whatever the
plugin measures (pod requests, or NodeMetric usage), always as amounts per
resource with a `pods` count; percentages are exact fractions of capacity,
so a node exactly at a threshold is never misjudged by float rounding.

- Only the resources named in the thresholds are judged. A resource the node
  does not offer (capacity 0) reads 0%, as upstream's normalizer does.
- Underutilized: EVERY judged resource at or below its low mark (upstream's
  `isNodeBelowThreshold`: "not above"). Overutilized: ANY judged resource
  strictly above its high mark (`isNodeAboveThreshold`).
- With `useDeviationThresholds` the marks float around the mean percentage
  of the nodes measured (per judged resource): low = mean - thresholds,
  high = mean + targetThresholds, each clamped to [0, 100].
- Headroom (`room`) is what a destination can take before its high mark:
  floor(high% * capacity) - used for judged resources, capacity - used for
  the basic ones (cpu, memory, pods) that are not judged, as upstream's
  `capNodeCapacitiesToThreshold` and `assessAvailableResourceInNodes`.
- Heat orders nodes: the mean percentage over the judged resources (each
  weighted 1, `lownodeload.usage.weighted_percent`). Upstream sums raw
  amounts (millicores + bytes + pods), so memory bytes decide every order
  (kubernetes-sigs/descheduler PR #384 review).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType

from descheduler.plugins.lownodeload import usage
from kube import quantity

__all__ = [
    "BASIC_RESOURCES",
    "Marks",
    "describe",
    "deviation_marks",
    "heat",
    "is_over",
    "is_under",
    "mark_amount",
    "over",
    "percent",
    "percentages",
    "room",
    "static_marks",
]

BASIC_RESOURCES = (quantity.CPU, quantity.MEMORY, quantity.PODS)
_MIN_PERCENT = Fraction(0)
_MAX_PERCENT = Fraction(100)


@dataclass(frozen=True, slots=True)
class Marks:
    """Low and high marks in percent, per judged resource."""

    low: Mapping[str, Fraction]
    high: Mapping[str, Fraction]

    @property
    def resources(self) -> tuple[str, ...]:
        """The judged resources, sorted."""
        return tuple(sorted(set(self.low) | set(self.high)))


def _exact(values: Mapping[str, float]) -> dict[str, Fraction]:
    return {name: Fraction(value) for name, value in values.items()}


def static_marks(low: Mapping[str, float], high: Mapping[str, float]) -> Marks:
    """The thresholds as given."""
    return Marks(MappingProxyType(_exact(low)), MappingProxyType(_exact(high)))


def _clamp(value: Fraction) -> Fraction:
    return min(max(value, _MIN_PERCENT), _MAX_PERCENT)


def deviation_marks(
    measured: Sequence[Mapping[str, Fraction]],
    low: Mapping[str, float],
    high: Mapping[str, float],
) -> Marks:
    """Marks around the mean of `measured` (each node's percentages), clamped to [0, 100]."""
    names = set(low) | set(high)
    mean = {
        name: sum((m.get(name, _MIN_PERCENT) for m in measured), _MIN_PERCENT) / len(measured)
        if measured
        else _MIN_PERCENT
        for name in names
    }
    return Marks(
        MappingProxyType({n: _clamp(mean[n] - Fraction(v)) for n, v in low.items()}),
        MappingProxyType({n: _clamp(mean[n] + Fraction(v)) for n, v in high.items()}),
    )


def percent(used: int, capacity: int) -> Fraction:
    """used / capacity in percent, exactly; 0 when the node does not offer the resource."""
    return Fraction(used * 100, capacity) if capacity > 0 else _MIN_PERCENT


def percentages(
    used: Mapping[str, int], capacity: Mapping[str, int], resources: Iterable[str]
) -> dict[str, Fraction]:
    """The percentage of each named resource."""
    return {name: percent(used.get(name, 0), capacity.get(name, 0)) for name in resources}


def is_under(
    used: Mapping[str, int], capacity: Mapping[str, int], low: Mapping[str, Fraction]
) -> bool:
    """Every judged resource at or below its low mark."""
    return all(percent(used.get(n, 0), capacity.get(n, 0)) <= mark for n, mark in low.items())


def over(
    used: Mapping[str, int], capacity: Mapping[str, int], high: Mapping[str, Fraction]
) -> list[str]:
    """The judged resources strictly above their high mark, sorted."""
    return sorted(
        n for n, mark in high.items() if percent(used.get(n, 0), capacity.get(n, 0)) > mark
    )


def is_over(
    used: Mapping[str, int], capacity: Mapping[str, int], high: Mapping[str, Fraction]
) -> bool:
    """Any judged resource strictly above its high mark."""
    return bool(over(used, capacity, high))


def mark_amount(mark: Fraction, capacity: int) -> int:
    """The amount a percentage mark allows, truncated like upstream's int64()."""
    return math.floor(mark * capacity / 100)


def room(
    used: Mapping[str, int],
    capacity: Mapping[str, int],
    high: Mapping[str, Fraction],
    resources: Iterable[str],
) -> dict[str, int]:
    """What the node can take before its high marks (its capacity where none is set)."""
    out = {}
    for name in resources:
        cap = capacity.get(name, 0)
        limit = mark_amount(high[name], cap) if name in high else cap
        out[name] = limit - used.get(name, 0)
    return out


def heat(used: Mapping[str, int], capacity: Mapping[str, int], resources: Iterable[str]) -> float:
    """The node's mean percentage over `resources` (each weighted 1)."""
    return usage.weighted_percent(used, capacity, dict.fromkeys(resources, 1))


def describe(
    used: Mapping[str, int], capacity: Mapping[str, int], marks: Mapping[str, Fraction]
) -> str:
    """ "cpu 87.50% (mark 70.00%)" for each resource of `marks`, sorted."""
    return ", ".join(
        f"{name} {float(percent(used.get(name, 0), capacity.get(name, 0))):.2f}%"
        f" (mark {float(mark):.2f}%)"
        for name, mark in sorted(marks.items())
    )
