"""Everything the manager writes into one Node's status: its Batch and Mid resources.

`calculate` runs both formulas over the same Node, Pods and NodeMetric (Koordinator
runs its `batchresource` and `midresource` plugins side by side in one
noderesource reconcile) and the controller writes the four keys in one merge patch,
under one diff threshold, update interval and degrade rule (`batch.needs_update`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from kube import objects, slo
from manager.noderesource import batch, config, mid


@dataclass(frozen=True, slots=True)
class NodeAllocatable:
    """A node's batch and mid allocatable."""

    batch: batch.BatchAllocatable
    mid: mid.MidAllocatable

    @property
    def degraded(self) -> str | None:
        """Why the resources are degraded to 0, or None (both degrade on the same NodeMetric)."""
        return self.batch.degraded or self.mid.degraded

    def as_resources(self) -> dict[str, int]:
        return {**self.batch.as_resources(), **self.mid.as_resources()}


def calculate(
    strategy: config.ColocationStrategy,
    node: objects.Node,
    pods: Iterable[objects.Pod],
    metric: slo.NodeMetric | None,
    now: datetime,
) -> NodeAllocatable:
    """The node's batch and mid allocatable under `strategy` at `now`."""
    pods = list(pods)
    return NodeAllocatable(
        batch.calculate(strategy, node, pods, metric, now),
        mid.calculate(strategy, node, pods, metric, now),
    )
