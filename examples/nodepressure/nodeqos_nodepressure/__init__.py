"""NodePressure: evicts best-effort pods from nodes reporting memory, disk or PID pressure.

A kubelet under pressure evicts pods itself, but only once its hard
thresholds are crossed, and it picks by its own ranking; this plugin moves the
pods the cluster can best spare (Koordinator QoS BE by default, lowest
priority and youngest first) while the node merely reports the condition, a
few per node and cycle, through the descheduler's evictor (filters, limits,
PodDisruptionBudgets, dry run).

This module is the plugin surface the descheduler loads through the entry
point `NodePressure = "nodeqos_nodepressure"` (group
`nodeqos.descheduler.plugins`): the name profiles use, the Args type the
config loader decodes and validates, the extension points and the factory.
"""

from descheduler.config import ExtensionPoint
from nodeqos_nodepressure.args import NodePressureArgs, Pressure
from nodeqos_nodepressure.plugin import NAME, NodePressure, factory

Args = NodePressureArgs
EXTENSION_POINTS = frozenset({ExtensionPoint.DESCHEDULE})

__all__ = [
    "EXTENSION_POINTS",
    "NAME",
    "Args",
    "NodePressure",
    "NodePressureArgs",
    "Pressure",
    "factory",
]
