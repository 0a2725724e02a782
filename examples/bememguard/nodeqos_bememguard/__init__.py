"""BEMemoryGuard: keeps best-effort pods off nodes whose NodeMetric shows high memory use.

A BE pod is the first the agent evicts when memory runs short (BEMemoryEvict), so
placing one on a node already past the eviction line only buys an eviction a
minute later. This filter refuses such nodes for BE pods (Koordinator QoS `BE`:
label `koordinator.sh/qosClass: BE`, or a Kubernetes BestEffort pod) and lets
every other pod through.

This module is the plugin surface the extender loads through the entry point
`BEMemoryGuard = "nodeqos_bememguard"` (group `nodeqos.scheduler.plugins`).
"""

from extender.framework import ExtensionPoint
from nodeqos_bememguard.plugin import NAME, Args, BEMemoryGuard, factory

EXTENSION_POINTS = frozenset({ExtensionPoint.FILTER})

__all__ = ["EXTENSION_POINTS", "NAME", "Args", "BEMemoryGuard", "factory"]
