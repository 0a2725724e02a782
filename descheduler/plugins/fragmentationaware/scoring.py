"""How lopsided a node's requests are: the population standard deviation of its
requested fractions (Σ pod requests / allocatable) over the chosen resources.

Koordinator's `scoring.go` (FragmentationAware): a resource whose allocatable is
0 is left out; no resource left scores 0. Pure functions; the plugin calls them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from kube import objects


def fractions(
    requested: Mapping[str, int], allocatable: Mapping[str, int], resources: Iterable[str]
) -> list[float]:
    """Requested / allocatable per resource, skipping resources with no allocatable."""
    out = []
    for name in resources:
        capacity = allocatable.get(name, 0)
        if capacity:
            out.append(requested.get(name, 0) / capacity)
    return out


def std_dev(values: Sequence[float]) -> float:
    if not values:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


def imbalance(node: objects.Node, pods: Iterable[objects.Pod], resources: Sequence[str]) -> float:
    """The node's score with exactly `pods` on it."""
    requested: dict[str, int] = {}
    for pod in pods:
        for name in resources:
            requested[name] = requested.get(name, 0) + pod.requests.get(name, 0)
    return std_dev(fractions(requested, node.allocatable, resources))
