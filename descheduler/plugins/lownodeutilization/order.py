"""The order LowNodeUtilization and HighNodeUtilization try pods and nodes in: total orders.

Pods follow upstream's `SortPodsBasedOnPriorityLowToHigh`
(`pkg/descheduler/pod/pods.go`), made total with key tuples:

1. pods without `spec.priority` first, then lower priority first;
2. Kubernetes QoS: BestEffort, Burstable, Guaranteed;
3. pods without the `descheduler.alpha.kubernetes.io/prefer-no-eviction`
   annotation before pods with it;
4. namespace, name, UID, so ties end the same way every run (upstream's
   `sort.Slice` leaves them unspecified).

Nodes are ordered by `classify.heat` (hottest or coolest first), ties by name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from kube import objects
from kube.classify import KubeQOS

__all__ = ["PREFER_NO_EVICTION", "by_heat", "eviction_key"]

PREFER_NO_EVICTION: Final = "descheduler.alpha.kubernetes.io/prefer-no-eviction"
_QOS_RANK: Final = {KubeQOS.BEST_EFFORT: 0, KubeQOS.BURSTABLE: 1, KubeQOS.GUARANTEED: 2}

EvictionKey = tuple[int, int, int, int, str, str, str]


def eviction_key(pod: objects.Pod) -> EvictionKey:
    """The pod's sort key: smaller keys are evicted first."""
    return (
        0 if pod.priority is None else 1,
        pod.priority or 0,
        _QOS_RANK[pod.kube_qos],
        int(PREFER_NO_EVICTION in pod.annotations),
        pod.namespace,
        pod.name,
        pod.uid,
    )


def by_heat(
    nodes: Iterable[objects.Node],
    heat_of: Callable[[objects.Node], float],
    *,
    hottest_first: bool,
) -> list[objects.Node]:
    """Nodes by heat, ties by name."""
    sign = -1 if hottest_first else 1
    return sorted(nodes, key=lambda node: (sign * heat_of(node), node.name))
