"""Batch resources of a Node from its NodeMetric: Koordinator's slo-controller formula, pure.

`config.parse_colocation_config` reads the `colocation-config` JSON;
`batch.calculate` gives a node's batch-cpu/batch-memory, `mid.calculate` its
mid-cpu/mid-memory (Koordinator's `midresource` plugin); `batch.needs_update`
decides whether the Node's status is written. No I/O here: the manager's
controller feeds Nodes, Pods and NodeMetrics in and patches what comes out.
"""

from manager.noderesource import batch, config, mid
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
    "batch",
    "calculate",
    "config",
    "mid",
    "needs_update",
    "parse_colocation_config",
]
