"""Where an evicted pod could land, and how much room the destinations have left.

Shared by LowNodeUtilization and HighNodeUtilization. Upstream checks only
that the pod tolerates some destination's taints and then relies on the
evictor's nodeFit; here a pod is evicted only when a named destination takes
it (DESIGN.md: no eviction when no destination exists):

- the scheduler's predicates pass on it (`kube.scheduling.pod_fits_node`:
  cordon, taints, nodeSelector and required affinity, requests against
  allocatable with the requests projected so far this cycle), and
- the pod's amount keeps it at or below its high marks (`classify.room`).

Candidates are tried in the order given; the first that takes the pod wins.
With none, the refusal says `would_overload_destination` when some candidate
passed the predicates, `no_fit` when none did, `no_destination` when there
were no candidates.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction

from descheduler.framework import Reason, Refusal, Snapshot
from descheduler.plugins.lownodeutilization import classify
from descheduler.plugins.lownodeutilization.meter import Meter
from kube import objects, scheduling

__all__ = ["find", "headroom"]

_SHOWN = 3


def _summary(problems: list[str]) -> str:
    shown = "; ".join(problems[:_SHOWN])
    more = len(problems) - _SHOWN
    return f"{shown}; and {more} more" if more > 0 else shown


def find(
    snapshot: Snapshot,
    meter: Meter,
    pod: objects.Pod,
    amount: Mapping[str, int],
    candidates: Sequence[objects.Node],
    high: Mapping[str, Fraction],
    *,
    plugin: str,
) -> objects.Node | Refusal:
    """The first candidate that takes the pod, or why none does."""
    if not candidates:
        return Refusal(Reason.NO_DESTINATION, "no underutilized nodes", plugin)
    unschedulable: list[str] = []
    overloaded: list[str] = []
    for node in candidates:
        fit = scheduling.pod_fits_node(pod, node, snapshot.requested(node.name))
        if not fit.ok:
            unschedulable.append(f"{node.name}: {', '.join(fit.reasons)}")
            continue
        left = classify.room(meter.used(node.name), meter.capacity(node), high, high)
        short = sorted(name for name, free in left.items() if amount.get(name, 0) > free)
        if short:
            overloaded.append(f"{node.name}: would exceed its mark on {', '.join(short)}")
            continue
        return node
    if overloaded:
        return Refusal(
            Reason.WOULD_OVERLOAD_DESTINATION, _summary(overloaded + unschedulable), plugin
        )
    return Refusal(Reason.NO_FIT, _summary(unschedulable), plugin)


def headroom(
    meter: Meter,
    nodes: Iterable[objects.Node],
    high: Mapping[str, Fraction],
    resources: Iterable[str],
) -> dict[str, int]:
    """Σ `classify.room` over the nodes, per resource (negative rooms count)."""
    names = tuple(resources)
    total = dict.fromkeys(names, 0)
    for node in nodes:
        for name, free in classify.room(
            meter.used(node.name), meter.capacity(node), high, names
        ).items():
            total[name] += free
    return total
