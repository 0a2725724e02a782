"""Batch and Mid resources of a Node from its NodeMetric: Koordinator's slo-controller formulas, pure.

`config.parse_colocation_config` reads the `colocation-config` JSON;
`batch.calculate` gives a node's batch-cpu/batch-memory, `mid.calculate` its
mid-cpu/mid-memory (Koordinator's `midresource` plugin), `allocatable.calculate`
both, as the controller writes them (CPU normalization honoured: `normalization`); `batch.needs_update`
decides whether the Node's status is written. No I/O here: the manager's
controller feeds Nodes, Pods and NodeMetrics in and patches what comes out.
"""

from manager.noderesource import allocatable, batch, config, mid, normalization
from manager.noderesource.allocatable import NodeAllocatable
from manager.noderesource.batch import BatchAllocatable, calculate, needs_update
from manager.noderesource.config import (
    ColocationConfig,
    ColocationStrategy,
    parse_colocation_config,
)

__all__ = [
    "BatchAllocatable",
    "ColocationConfig",
    "ColocationStrategy",
    "NodeAllocatable",
    "allocatable",
    "batch",
    "calculate",
    "config",
    "mid",
    "needs_update",
    "normalization",
    "parse_colocation_config",
]
