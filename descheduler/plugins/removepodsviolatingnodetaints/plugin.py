"""RemovePodsViolatingNodeTaints: evicts pods that no longer tolerate their node's taints.

Semantics of kubernetes-sigs/descheduler
`pkg/framework/plugins/removepodsviolatingnodetaints/node_taint.go`; which
taints count is `taints.TaintFilter`. Pods in scope (`namespaces`,
`labelSelector`) that are neither Succeeded nor Failed (upstream's
`ListPodsOnANode`: they hold nothing) and leave a counted taint of their node
untolerated are the candidates, node by node in name order, pods in
`pod_order`. Each goes through the profile's evictor, which records why a
candidate stays (filtered, no_fit from DefaultEvictor's nodeFit,
limit_reached). Upstream stops at a limit; nodeqos asks for every candidate,
so each one carries its limit_reached reason.
"""

from __future__ import annotations

from descheduler.config import PluginArgs
from descheduler.framework import Handle, Snapshot
from descheduler.plugins import _deschedule
from descheduler.plugins.removepodsviolatingnodetaints.args import (
    RemovePodsViolatingNodeTaintsArgs,
)
from descheduler.plugins.removepodsviolatingnodetaints.taints import TaintFilter
from kube import objects

NAME = "RemovePodsViolatingNodeTaints"


class RemovePodsViolatingNodeTaints:
    name = NAME

    def __init__(self, args: RemovePodsViolatingNodeTaintsArgs, handle: Handle) -> None:
        self.args = args
        self._handle = handle
        self.taints = TaintFilter.build(
            include_prefer_no_schedule=args.include_prefer_no_schedule,
            included=args.included_taints,
            excluded=args.excluded_taints,
        )

    def deschedule(self, snapshot: Snapshot) -> None:
        # Only a node with a counted taint can have pods that violate it.
        tainted = [n for n in snapshot.nodes if any(self.taints.counts(t) for t in n.taints)]
        candidates = _deschedule.reasons(
            _deschedule.pods_in_scope(snapshot, self.args, including_terminal=False, nodes=tainted),
            self._untolerated,
        )
        _deschedule.evict_in_order(self._handle.evictor, candidates, plugin=NAME)

    def _untolerated(self, pod: objects.Pod, node: objects.Node) -> str | None:
        """Why the pod is a candidate (the taints of its node it does not tolerate), or None."""
        untolerated = self.taints.untolerated(pod, node)
        if not untolerated:
            return None
        shown = ", ".join(str(t) for t in untolerated)
        return f"does not tolerate taint {shown} of node {node.name}"


def factory(args: PluginArgs, handle: Handle) -> RemovePodsViolatingNodeTaints:
    return RemovePodsViolatingNodeTaints(
        RemovePodsViolatingNodeTaintsArgs.narrow(args, NAME), handle
    )
