"""RemoveDuplicates: evicts replicas of one owner that crowd a node, so they spread.

For every duplicate group (`groups`) on the cycle's nodes, a node holding more
than ceil(replicas / feasible nodes) of the group gives up the excess. Each
excess pod (in `groups.eviction_key` order, evictable ones only) needs a
destination before it is evicted: a feasible node other than its own that
holds fewer than the target and that it fits, given the requests projected
so far this cycle (`kube.scheduling.pod_fits_node`). The destination with
the fewest replicas of the group is chosen, ties by name; it is handed to the
evictor so the snapshot projects the move and later decisions see it.

Upstream evicts without asking where the pod could go, so a pod with nowhere
better to land comes back to the same node and is evicted again next cycle
(kubernetes-sigs/descheduler #75, #263). Here it is skipped with
`no_destination` (no feasible node below the target) or `no_fit` (such nodes
exist but the pod does not fit them). A refused eviction does not count
towards the excess: the next duplicate on the node is tried instead.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from descheduler.config import PluginArgs
from descheduler.framework import Handle, Reason, Refusal, Snapshot
from descheduler.plugins.removeduplicates import groups
from descheduler.plugins.removeduplicates.args import RemoveDuplicatesArgs
from kube import objects, scheduling

NAME = "RemoveDuplicates"
_FIT_REASONS_SHOWN = 3
_FINISHED = frozenset({"Succeeded", "Failed"})

log = logging.getLogger(__name__)


class RemoveDuplicates:
    """Upstream's RemoveDuplicates balance plugin on the nodeqos framework."""

    name = NAME

    def __init__(self, args: RemoveDuplicatesArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle

    def balance(self, snapshot: Snapshot) -> None:
        namespaces = self.args.namespaces
        pods = [
            pod
            for node in snapshot.nodes
            for pod in snapshot.pods_on(node.name)
            if pod.phase not in _FINISHED
            and not pod.is_terminating
            and (namespaces is None or namespaces.allows(pod.namespace))
        ]
        found = groups.group_pods(pods, self.args.exclude_owner_kinds)
        for key in sorted(found):
            if not self._balance_group(snapshot, key, found[key]):
                return

    def _balance_group(
        self, snapshot: Snapshot, key: groups.GroupKey, members: Sequence[objects.Pod]
    ) -> bool:
        """Move the group's excess replicas; False once the total limit is reached."""
        counts: dict[str, int] = {}
        for pod in members:
            counts[pod.node_name] = counts.get(pod.node_name, 0) + 1
        if max(counts.values()) < 2:
            return True
        feasible = groups.feasible_nodes(members, snapshot.nodes)
        target = groups.target_per_node(len(members), len(feasible))
        over = groups.excess(counts, target)
        log.debug(
            "group %s: %d replicas, %d feasible nodes, target %d per node, over on %s",
            key,
            len(members),
            len(feasible),
            target,
            over or "no node",
        )
        for source in sorted(over, key=lambda n: (-counts[n], n)):
            on_node = sorted((p for p in members if p.node_name == source), key=groups.eviction_key)
            need = over[source]
            for pod in self.handle.evictor.evictable(on_node, plugin=NAME):
                if need <= 0:
                    break
                destination = self._destination(snapshot, pod, feasible, counts, target)
                if isinstance(destination, Refusal):
                    self.handle.decisions.skip(pod, plugin=NAME, reason=destination)
                    continue
                reason = (
                    f"{counts[source]} replicas of {key} on node {source}, "
                    f"at most {target} per node over {len(feasible)} feasible nodes"
                )
                evictor = self.handle.evictor
                if evictor.evict(pod, plugin=NAME, reason=reason, destination=destination):
                    counts[source] -= 1
                    counts[destination] = counts.get(destination, 0) + 1
                    need -= 1
                elif evictor.total_limit_reached():
                    return False
                elif evictor.node_limit_reached(source) or evictor.namespace_limit_reached(
                    pod.namespace
                ):
                    break
        return True

    @staticmethod
    def _destination(
        snapshot: Snapshot,
        pod: objects.Pod,
        feasible: Sequence[objects.Node],
        counts: dict[str, int],
        target: int,
    ) -> str | Refusal:
        """The feasible node with the fewest replicas below the target that the pod fits."""
        below = sorted(
            (n for n in feasible if n.name != pod.node_name and counts.get(n.name, 0) < target),
            key=lambda n: (counts.get(n.name, 0), n.name),
        )
        if not below:
            detail = f"every other feasible node already holds {target} replicas or more"
            return Refusal(Reason.NO_DESTINATION, detail, NAME)
        misfits = []
        for node in below:
            fit = scheduling.pod_fits_node(pod, node, snapshot.requested(node.name))
            if fit.ok:
                return node.name
            misfits.append(f"{node.name}: {', '.join(fit.reasons)}")
        shown = "; ".join(misfits[:_FIT_REASONS_SHOWN])
        more = len(misfits) - _FIT_REASONS_SHOWN
        detail = f"fits no feasible node below {target} replicas ({shown}"
        detail += f"; {more} more)" if more > 0 else ")"
        return Refusal(Reason.NO_FIT, detail, NAME)


def factory(args: PluginArgs, handle: Handle) -> RemoveDuplicates:
    return RemoveDuplicates(RemoveDuplicatesArgs.narrow(args, NAME), handle)
