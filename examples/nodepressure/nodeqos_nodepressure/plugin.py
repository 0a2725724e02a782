"""The NodePressure Deschedule plugin: per node under pressure, the sparest pods first.

Called by the descheduler's runner once per cycle with the cycle's snapshot;
evicts only through `handle.evictor`, which applies the profile's filters
(DefaultEvictor, any custom Filter plugin), the eviction limits and dry run,
and records why a refused pod stays.
"""

from __future__ import annotations

from datetime import UTC, datetime

from descheduler.config import PluginArgs
from descheduler.framework import Handle, Snapshot
from kube import objects
from nodeqos_nodepressure.args import NodePressureArgs

NAME = "NodePressure"
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
_EPOCH = datetime.min.replace(tzinfo=UTC)


def eviction_order(pod: objects.Pod) -> tuple[int, float, str, str]:
    """Lowest priority first, then the youngest (least work lost), then by name."""
    created = pod.creation_timestamp or _EPOCH
    return (pod.priority or 0, -created.timestamp(), pod.namespace, pod.name)


class NodePressure:
    name = NAME

    def __init__(self, args: NodePressureArgs, handle: Handle) -> None:
        self.args = args
        self._handle = handle
        self._classes = frozenset(args.qos_classes)

    def deschedule(self, snapshot: Snapshot) -> None:
        for node in snapshot.nodes:
            pressure = [c.value for c in self.args.conditions if node.condition(c) == "True"]
            if pressure:
                self._relieve(snapshot, node, ", ".join(pressure))

    def _relieve(self, snapshot: Snapshot, node: objects.Node, pressure: str) -> None:
        candidates = sorted(
            (
                pod
                for pod in snapshot.pods_on(node.name)
                if pod.phase not in TERMINAL_PHASES
                and pod.koord_qos in self._classes
                and self.args.in_scope(pod)
            ),
            key=eviction_order,
        )
        evictor = self._handle.evictor
        evicted = 0
        for pod in evictor.evictable(candidates, plugin=NAME):
            if evicted >= self.args.max_pods_per_node:
                break
            reason = f"node {node.name} reports {pressure}; {pod.koord_qos} pod"
            if evictor.evict(pod, plugin=NAME, reason=reason):
                evicted += 1


def factory(args: PluginArgs, handle: Handle) -> NodePressure:
    if not isinstance(args, NodePressureArgs):
        raise TypeError(f"{NAME} needs NodePressureArgs, not {type(args).__name__}")
    return NodePressure(args, handle)
