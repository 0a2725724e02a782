"""The rules of RemovePodsViolatingNodeAffinity, and where an evicted pod could go. Pure.

kubernetes-sigs/descheduler
`pkg/framework/plugins/removepodsviolatingnodeaffinity/node_affinity.go`:

- `requiredDuringSchedulingIgnoredDuringExecution`: a pod violates when it has
  a required node affinity (a `nodeSelector` alone does not make it a
  candidate) and its node no longer matches its node selector and required
  affinity together (`PodMatchNodeSelector`);
- `preferredDuringSchedulingIgnoredDuringExecution`: a pod violates when
  another node scores more on its preferred terms
  (`kube.scheduling.preferred_weight`) than its own (`better_nodes`).

Either way it is only evicted when it fits somewhere (upstream:
`PodFitsAnyNode`); `destination` answers that with the scheduler checks of
`kube.scheduling.pod_fits_node` against projected requests, so capacity taken
by earlier evictions of the cycle counts. For preferred affinity the node must
be one that scores more (upstream only asks that the best score anywhere beats
the current one and, separately, that the pod fits some node).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from kube import objects, scheduling

_REASONS_SHOWN = 3


def violates_required(pod: objects.Pod, node: objects.Node) -> bool:
    """The pod has a required node affinity and `node` no longer satisfies it."""
    return pod.required_node_affinity is not None and not (
        scheduling.matches_node_selector_and_affinity(pod, node)
    )


def better_nodes(
    pod: objects.Pod, node: objects.Node, nodes: Iterable[objects.Node]
) -> list[tuple[int, objects.Node]]:
    """(score, node) of the other nodes scoring more than `node` on the pod's preferred
    terms, best first, then by name."""
    if not pod.preferred_node_affinity:
        return []
    current = scheduling.preferred_weight(pod, node)
    scored = [(scheduling.preferred_weight(pod, n), n) for n in nodes if n.name != node.name]
    better = [(score, n) for score, n in scored if score > current]
    return sorted(better, key=lambda entry: (-entry[0], entry[1].name))


@dataclass(frozen=True, slots=True)
class Destination:
    """The first node the pod fits, or None with why each node tried does not."""

    node: objects.Node | None
    misfits: tuple[str, ...] = ()

    def explain(self, among: str = "other ready node") -> str:
        if not self.misfits:
            return f"no {among}"
        shown = "; ".join(self.misfits[:_REASONS_SHOWN])
        more = len(self.misfits) - _REASONS_SHOWN
        return f"fits no {among} ({shown}{f'; {more} more' if more > 0 else ''})"


def destination(
    pod: objects.Pod,
    nodes: Iterable[objects.Node],
    requested: Callable[[str], Mapping[str, int]],
) -> Destination:
    """The first of `nodes` (other than the pod's own) the pod fits, in the order given."""
    misfits = []
    for node in nodes:
        if node.name == pod.node_name:
            continue
        fit = scheduling.pod_fits_node(pod, node, requested(node.name))
        if fit.ok:
            return Destination(node)
        misfits.append(f"{node.name}: {', '.join(fit.reasons)}")
    return Destination(None, tuple(misfits))
