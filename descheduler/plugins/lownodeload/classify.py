"""Node pools, per-node marks and the hot/cool classification of LowNodeLoad.

Pure maths over `usage.NodeLoad`; `plan` calls it once per pool and cycle.
Semantics follow Koordinator's `loadaware` plugin (`low_node_load.go`,
`utilization_util.go`: `newThresholds`, `getNodeThresholds`, `classifyNodes`,
`isNodeOverutilized`, `isNodeUnderutilized`, `calcAverageResourceUsagePercent`),
with these deliberate differences:

- Pools are exclusive: a node belongs to the first pool (in `Args.pools` order)
  whose nodeSelector selects it (no selector selects every node); nodes in no
  pool are left alone. Koordinator runs the top-level pool over every node and
  then each `nodePools` entry over the nodes that were not sources before.
- Only resources named in a pool's thresholds are judged, and a resource the
  node does not offer (capacity 0) is not judged on that node. Koordinator
  also judges memory against an implicit 100% mark, and marks a node with no
  capacity for a judged resource hot as soon as it uses any.
- A destination must be Ready as well as schedulable.
- Prod classification is opt-in: it exists only when the pool sets
  prodHighThresholds. Koordinator defaults missing prod marks to 100%, which
  makes every node between the marks count as "prod low".

Marks are absolute amounts: floor(percent * capacity / 100), as Koordinator's
`resourceThreshold` truncates. A node is hot when ANY judged resource is above
its high mark (strictly), low when schedulable, Ready and EVERY judged resource
is at or below its low mark.

With `useDeviationThresholds` the marks float around the pool's mean usage:
low = mean - lowThreshold, high = mean + highThreshold, each clamped to
[0, 100] before converting to an amount. The mean is Σ usage% / number of
nodes with known load in the pool. As in Koordinator, a resource whose low
deviation is 0 gets both marks at full capacity (0 reads as "not set" there).

Prod marks (prodLowThresholds/prodHighThresholds) apply the same rules to the
usage of the node's prod pods (`usage.priority_class`). Koordinator's
classification, kept here:

- a hot node is a (node) source; all its pods are candidates;
- a node that is not hot but whose prod usage is above prodHigh is a prod
  source; only its prod pods are candidates;
- low nodes that are not prod-hot receive pods from node sources;
- prod-low nodes that are neither hot nor prod-hot receive pods from prod
  sources (they may sit between the node marks).
"""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType

from descheduler.plugins.lownodeload import usage
from descheduler.plugins.lownodeload.args import NodePool
from kube import objects

__all__ = [
    "Marks",
    "Track",
    "Verdict",
    "assign_pools",
    "by_heat",
    "classify",
    "describe_over",
    "excess",
    "pool_marks",
]

_MIN_PERCENT = 0
_MAX_PERCENT = 100


class Track(enum.StrEnum):
    """Which load a source is hot on: the whole node's, or its prod pods'."""

    NODE = "node"
    PROD = "prod"


@dataclass(frozen=True, slots=True)
class Marks:
    """One node's low and high marks as absolute amounts, per judged resource."""

    low: Mapping[str, int]
    high: Mapping[str, int]
    prod_low: Mapping[str, int]
    prod_high: Mapping[str, int]

    def high_for(self, track: Track) -> Mapping[str, int]:
        """The high marks the track is judged against."""
        return self.high if track is Track.NODE else self.prod_high

    def low_for(self, track: Track) -> Mapping[str, int]:
        """The low marks the track is judged against."""
        return self.low if track is Track.NODE else self.prod_low


@dataclass(frozen=True, slots=True)
class Verdict:
    """How a node with known load stands against its marks."""

    hot: bool
    prod_hot: bool
    low: bool
    prod_low: bool

    @property
    def source_track(self) -> Track | None:
        """The track the node is hot on, if any (the node track wins)."""
        if self.hot:
            return Track.NODE
        if self.prod_hot:
            return Track.PROD
        return None

    @property
    def destination_for(self) -> frozenset[Track]:
        """The tracks whose sources may send pods here."""
        tracks = set()
        if self.low and not self.prod_hot:
            tracks.add(Track.NODE)
        if self.prod_low and not self.hot and not self.prod_hot:
            tracks.add(Track.PROD)
        return frozenset(tracks)


def assign_pools(
    nodes: Iterable[objects.Node], pools: Sequence[NodePool]
) -> tuple[list[list[objects.Node]], list[objects.Node]]:
    """Each pool's nodes (same order as `pools`), and the nodes in no pool.

    A node joins the first pool whose nodeSelector selects it; no selector
    selects every node.
    """
    members: list[list[objects.Node]] = [[] for _ in pools]
    unpooled: list[objects.Node] = []
    for node in nodes:
        for index, pool in enumerate(pools):
            if pool.node_selector is None or pool.node_selector.matches(node.labels):
                members[index].append(node)
                break
        else:
            unpooled.append(node)
    return members, unpooled


@functools.lru_cache(maxsize=4096)  # nodes of one shape share every mark
def _amount(percent: float, capacity: int) -> int:
    # Exact arithmetic on the float the user wrote, truncated like Go's int64().
    return math.floor(Fraction(percent) * capacity / 100)


def _clamp(percent: float) -> float:
    return min(max(percent, _MIN_PERCENT), _MAX_PERCENT)


def _mean_percent(loads: Sequence[usage.NodeLoad], prod: bool) -> dict[str, float]:
    """Koordinator's calcAverageResourceUsagePercent: Σ usage% / number of nodes."""
    if not loads:
        return {}
    sums: dict[str, float] = {}
    for load in loads:
        used = load.prod_usage if prod else load.usage
        for name, percent in usage.percentages(used, load.capacity).items():
            sums[name] = sums.get(name, 0.0) + percent
    return {name: total / len(loads) for name, total in sums.items()}


def _marks_pair(
    low: Mapping[str, float],
    high: Mapping[str, float],
    capacity: Mapping[str, int],
    mean: Mapping[str, float] | None,
) -> tuple[dict[str, int], dict[str, int]]:
    lows: dict[str, int] = {}
    highs: dict[str, int] = {}
    for name, low_percent in low.items():
        cap = capacity.get(name, 0)
        if cap <= 0 or name not in high:
            continue
        if mean is None:
            lows[name] = _amount(low_percent, cap)
            highs[name] = _amount(high[name], cap)
        elif low_percent == _MIN_PERCENT:
            lows[name] = highs[name] = cap
        else:
            average = mean.get(name, 0.0)
            lows[name] = _amount(_clamp(average - low_percent), cap)
            highs[name] = _amount(_clamp(average + high[name]), cap)
    return lows, highs


def pool_marks(pool: NodePool, loads: Sequence[usage.NodeLoad]) -> dict[objects.NodeName, Marks]:
    """Every node's marks in a pool; `loads` are the pool's nodes with known load."""
    deviation = pool.use_deviation_thresholds
    mean = _mean_percent(loads, prod=False) if deviation else None
    prod_mean = _mean_percent(loads, prod=True) if deviation else None
    marks: dict[objects.NodeName, Marks] = {}
    for load in loads:
        low, high = _marks_pair(pool.low_thresholds, pool.high_thresholds, load.capacity, mean)
        prod_low, prod_high = _marks_pair(
            pool.prod_low_thresholds, pool.prod_high_thresholds, load.capacity, prod_mean
        )
        marks[load.name] = Marks(
            MappingProxyType(low),
            MappingProxyType(high),
            MappingProxyType(prod_low),
            MappingProxyType(prod_high),
        )
    return marks


def excess(used: Mapping[str, int], high: Mapping[str, int]) -> dict[str, int]:
    """The amount above the high mark for each resource strictly above it (empty: not hot)."""
    return {
        name: used.get(name, 0) - mark for name, mark in high.items() if used.get(name, 0) > mark
    }


def describe_over(load: usage.NodeLoad, used: Mapping[str, int], marks: Marks, track: Track) -> str:
    """ "cpu usage 92.50% > high mark 70.00%" for each resource above its high mark."""
    prefix = "prod " if track is Track.PROD else ""
    parts = []
    for name, mark in sorted(marks.high_for(track).items()):
        cap = load.capacity.get(name, 0)
        if cap > 0 and used.get(name, 0) > mark:
            parts.append(
                f"{prefix}{name} usage {used.get(name, 0) * 100 / cap:.2f}%"
                f" > high mark {mark * 100 / cap:.2f}%"
            )
    return "; ".join(parts)


def _all_within(used: Mapping[str, int], low: Mapping[str, int]) -> bool:
    return all(used.get(name, 0) <= mark for name, mark in low.items())


def classify(load: usage.NodeLoad, marks: Marks, *, prod_enabled: bool) -> Verdict:
    """The node's verdict; prod flags stay False unless the pool sets prod marks."""
    node = load.node
    takes_pods = node.ready and not node.unschedulable
    return Verdict(
        hot=bool(excess(load.usage, marks.high)),
        prod_hot=prod_enabled and bool(excess(load.prod_usage, marks.prod_high)),
        low=takes_pods and _all_within(load.usage, marks.low),
        prod_low=prod_enabled and takes_pods and _all_within(load.prod_usage, marks.prod_low),
    )


def by_heat(
    loads: Iterable[usage.NodeLoad],
    weights: Mapping[str, int],
    *,
    used: Mapping[objects.NodeName, Mapping[str, int]] | None = None,
    hottest_first: bool = True,
) -> list[usage.NodeLoad]:
    """Loads ordered by weighted usage% (`usage.weighted_percent`), ties by node name.

    `used` overrides a node's usage (projected amounts); default is its measured usage.
    """

    def score(load: usage.NodeLoad) -> float:
        amounts = load.usage if used is None else used.get(load.name, load.usage)
        return usage.weighted_percent(amounts, load.capacity, weights)

    if hottest_first:
        return sorted(loads, key=lambda load: (-score(load), load.name))
    return sorted(loads, key=lambda load: (score(load), load.name))
