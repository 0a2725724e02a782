"""Everything the manager writes into one Node's status: its Batch and Mid resources.

`calculate` runs both formulas over the same Node, Pods and NodeMetric (Koordinator
runs its `batchresource` and `midresource` plugins side by side in one
noderesource reconcile) and the controller writes the four keys in one merge patch,
under one diff threshold, update interval and degrade rule (`batch.needs_update`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from kube import objects, slo
from manager.noderesource import batch, config, mid, normalization


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
    """The node's batch and mid allocatable under `strategy` at `now`, their CPU amplified by
    the node's CPU normalization ratio (`normalization`)."""
    pods = list(pods)
    found_batch = batch.calculate(strategy, node, pods, metric, now)
    found_mid = mid.calculate(strategy, node, pods, metric, now)
    ratio = normalization.cpu_normalization_ratio(node.annotations)
    if ratio is not None:
        cpu = normalization.amplify_cpu
        found_batch = dataclasses.replace(found_batch, cpu=cpu(found_batch.cpu, ratio))
        found_mid = dataclasses.replace(found_mid, cpu=cpu(found_mid.cpu, ratio))
    return NodeAllocatable(found_batch, found_mid)
