"""One consistent, indexed view of the cluster per descheduling cycle, with projections.

The runner takes a `ClusterState` from its `ClusterSource` once per cycle and
wraps it in a `Snapshot` that every plugin of every profile shares
(docs/design.md, "Beyond the reference" 1):

- `nodes`: the Ready nodes matching the top-level `nodeSelector`, by name;
- pods indexed by node and by owner (controller reference UID), PDBs,
  NodeMetrics by node name, namespace labels and PriorityClass values;
- projected state: `record_eviction` (called by the evictor for every eviction
  it lets through, real or dry-run) removes the pod from its node, moves its
  requests to the destination when one is named, and moves `usage` between the
  per-node `usage` entries a load-aware plugin set. Later plugins in the same
  cycle therefore see earlier decisions.

The base data never changes; only the projection does. `restricted()` gives a
profile a view limited to its own nodeSelector that shares the projection.

Building one is part of every cycle (150,000 pods at 5,000 nodes), so the
constructor indexes only what every cycle needs: pods by node, each node's
pods sorted on their own (many small sorts are cheaper than one big one). The
index by UID, the global pod order and the index by owner are built on first
use and shared with the restricted views.
"""

from __future__ import annotations

import bisect
import copy
import operator
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType

from descheduler.framework.pdb import DisruptionBudget
from descheduler.framework.report import NodeProjection
from kube import objects, quantity, scheduling, selectors, slo
from kube.objects import NodeName, PodUID
from kube.quantity import Resources

# Created by every API server at start-up (pkg/apis/scheduling: SystemCriticalPriority).
BUILTIN_PRIORITY_CLASSES: Mapping[str, int] = MappingProxyType(
    {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}
)
_TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterState:
    """The raw material of a snapshot, as a `ClusterSource` delivers it."""

    nodes: tuple[objects.Node, ...] = ()
    pods: tuple[objects.Pod, ...] = ()
    pdbs: tuple[DisruptionBudget, ...] = ()
    node_metrics: tuple[slo.NodeMetric, ...] = ()
    namespaces: Mapping[str, Mapping[str, str]] = field(
        default_factory=lambda: MappingProxyType({})
    )  # name -> labels
    priority_classes: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))


def pod_order(pod: objects.Pod) -> tuple[str, str, str]:
    """A total order on pods: namespace, name, UID."""
    return (pod.namespace, pod.name, pod.uid)


_NAMESPACE = operator.attrgetter("namespace")
_NAME = operator.attrgetter("name")
_UID = operator.attrgetter("uid")


def _in_pod_order(pods: Iterable[objects.Pod]) -> list[objects.Pod]:
    """`sorted(pods, key=pod_order)`, for less.

    Three stable sorts on one field each, least significant first, give the same
    list (ties in input order) without building a key tuple per pod, which is
    most of the cost of the single sort.
    """
    ordered = sorted(pods, key=_UID)
    ordered.sort(key=_NAME)
    ordered.sort(key=_NAMESPACE)
    return ordered


def owner_uid(pod: objects.Pod) -> str | None:
    """The controller's UID, else the first owner's (upstream indexes all owner refs)."""
    ref = pod.workload_ref
    return ref.uid if ref is not None else None


def consumes_resources(pod: objects.Pod) -> bool:
    """Terminal pods (Succeeded/Failed) hold no requests, as the scheduler counts."""
    return pod.phase not in _TERMINAL_PHASES


def is_healthy(pod: objects.Pod) -> bool:
    """Ready, the disruption controller's notion of a healthy pod."""
    return pod.condition("Ready") == "True" and not pod.is_terminating


@dataclass(slots=True)
class _Lazy:
    """Indexes built on first use, shared by a snapshot and its restricted views."""

    pods: tuple[objects.Pod, ...]  # as the state gave them
    by_uid: dict[str, objects.Pod] | None = None
    ordered: tuple[objects.Pod, ...] | None = None  # what `pods()` yields, in pod_order
    by_owner: dict[str, tuple[objects.Pod, ...]] | None = None


@dataclass(slots=True)
class _Projection:
    """The mutable, cycle-local state shared by a snapshot and its restricted views."""

    evicted: dict[PodUID, objects.Pod] = field(default_factory=dict)
    requests: dict[str, Resources] = field(default_factory=dict)
    requests_before: dict[str, Resources] = field(default_factory=dict)
    usage: dict[str, Resources] = field(default_factory=dict)
    usage_before: dict[str, Resources] = field(default_factory=dict)
    arrivals: dict[str, list[objects.Pod]] = field(default_factory=dict)
    pdb_used: dict[str, int] = field(default_factory=dict)
    touched: set[str] = field(default_factory=set)


class Snapshot:
    """The cluster as one cycle sees it. Build with `Snapshot(state, taken_at=...)`."""

    __slots__ = (
        "_all_nodes",
        "_by_node",
        "_lazy",
        "_metrics",
        "_namespaces",
        "_p",
        "_priority_classes",
        "nodes",
        "pdbs",
        "taken_at",
    )

    def __init__(
        self,
        state: ClusterState,
        *,
        taken_at: datetime,
        node_selector: selectors.LabelSelector | None = None,
    ) -> None:
        self.taken_at = taken_at
        self._all_nodes: Mapping[str, objects.Node] = MappingProxyType(
            {n.name: n for n in state.nodes}
        )
        self.nodes: tuple[objects.Node, ...] = _select(state.nodes, node_selector)
        self._lazy = _Lazy(state.pods)
        by_node: dict[str, list[objects.Pod]] = {}
        for pod in state.pods:
            found = by_node.get(pod.node_name)
            if found is None:
                by_node[pod.node_name] = [pod]
            else:
                found.append(pod)
        # A stable sort per node gives each node exactly the order of a global sort.
        self._by_node = {k: tuple(_in_pod_order(v)) for k, v in by_node.items()}
        self.pdbs: tuple[DisruptionBudget, ...] = tuple(sorted(state.pdbs, key=lambda b: b.key))
        self._metrics: Mapping[str, slo.NodeMetric] = MappingProxyType(
            {m.name: m for m in state.node_metrics}
        )
        self._namespaces = state.namespaces
        self._priority_classes = {**BUILTIN_PRIORITY_CLASSES, **state.priority_classes}
        self._p = _Projection()

    def restricted(self, node_selector: selectors.LabelSelector | None) -> Snapshot:
        """A view whose `nodes` also match `node_selector` (a profile's); same projection."""
        if node_selector is None:
            return self
        view = copy.copy(self)
        view.nodes = _select(self.nodes, node_selector)
        return view

    # -- nodes -----------------------------------------------------------------

    def node(self, name: str) -> objects.Node | None:
        """Any node by name, including ones outside `nodes` (not Ready, not selected)."""
        return self._all_nodes.get(name)

    @property
    def node_names(self) -> tuple[NodeName, ...]:
        return tuple(n.name for n in self.nodes)

    def node_metric(self, node: str) -> slo.NodeMetric | None:
        return self._metrics.get(node)

    @property
    def node_metrics(self) -> Mapping[str, slo.NodeMetric]:
        return self._metrics

    # -- pods ------------------------------------------------------------------

    def pods_on(self, node: str) -> tuple[objects.Pod, ...]:
        """Pods on `node` not evicted this cycle, in `pod_order`."""
        pods = self._by_node.get(node, ())
        evicted = self._p.evicted
        return tuple(p for p in pods if p.uid not in evicted) if evicted else pods

    def namespace_pods_on(self, node: str, namespace: str) -> tuple[objects.Pod, ...]:
        """`pods_on(node)` limited to one namespace, found without walking the node's others.

        A node's pods are in `pod_order`, namespace first, so one namespace's
        pods are a contiguous run of them.
        """
        pods = self._by_node.get(node, ())
        start = bisect.bisect_left(pods, namespace, key=_NAMESPACE)
        end = bisect.bisect_right(pods, namespace, lo=start, key=_NAMESPACE)
        found = pods[start:end]
        evicted = self._p.evicted
        return tuple(p for p in found if p.uid not in evicted) if evicted else found

    def pods_of_owner(self, uid: str) -> tuple[objects.Pod, ...]:
        """Pods whose controller (or first owner) has this UID, minus this cycle's evictions."""
        evicted = self._p.evicted
        return tuple(p for p in self._owners().get(uid, ()) if p.uid not in evicted)

    def pods(self) -> Iterator[objects.Pod]:
        """Every pod not evicted this cycle, in `pod_order`."""
        evicted = self._p.evicted
        return (p for p in self._ordered() if p.uid not in evicted)

    def _uids(self) -> dict[str, objects.Pod]:
        lazy = self._lazy
        by_uid = lazy.by_uid
        if by_uid is None:
            by_uid = {pod.uid: pod for pod in lazy.pods}
            if len(by_uid) != len(lazy.pods):
                # Duplicate UIDs (never in a real cluster): the global sort decides
                # which pod is kept and the order of `pods()`, as it always did.
                every = _in_pod_order(lazy.pods)
                by_uid = {pod.uid: pod for pod in every}
                lazy.ordered = tuple(by_uid.values())
                lazy.by_owner = _by_owner(every)
            lazy.by_uid = by_uid
        return by_uid

    def _ordered(self) -> tuple[objects.Pod, ...]:
        by_uid = self._uids()
        lazy = self._lazy
        if lazy.ordered is None:
            lazy.ordered = tuple(_in_pod_order(by_uid.values()))
        return lazy.ordered

    def _owners(self) -> dict[str, tuple[objects.Pod, ...]]:
        ordered = self._ordered()
        lazy = self._lazy
        if lazy.by_owner is None:
            lazy.by_owner = _by_owner(ordered)
        return lazy.by_owner

    def pod(self, uid: str) -> objects.Pod | None:
        return self._uids().get(uid)

    def arrivals(self, node: str) -> tuple[objects.Pod, ...]:
        """Pods projected to move to `node` this cycle (their evicted originals)."""
        return tuple(self._p.arrivals.get(node, ()))

    # -- other objects -----------------------------------------------------------

    def pdbs_covering(self, pod: objects.Pod) -> tuple[DisruptionBudget, ...]:
        return tuple(b for b in self.pdbs if b.covers(pod))

    def disruptions_left(self, pdb: DisruptionBudget) -> int:
        """The budget's `disruptionsAllowed` minus healthy pods it lost this cycle."""
        return pdb.disruptions_allowed - self._p.pdb_used.get(pdb.key, 0)

    def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        """The namespace's labels; None when the namespace is unknown."""
        return self._namespaces.get(namespace)

    def priority_class_value(self, name: str) -> int | None:
        return self._priority_classes.get(name)

    # -- projection --------------------------------------------------------------

    def requested(self, node: str) -> Resources:
        """Projected sum of pod requests on `node`, with a `pods` count."""
        found = self._p.requests.get(node)
        if found is None:
            found = self._base_requests(node)
            self._p.requests[node] = found
        return found

    def _base_requests(self, node: str) -> Resources:
        before = self._p.requests_before.get(node)
        if before is None:
            pods = [p for p in self._by_node.get(node, ()) if consumes_resources(p)]
            before = self._p.requests_before[node] = scheduling.requested_on(pods)
        return before

    def usage(self, node: str) -> Resources | None:
        """The projected usage a plugin set for `node` (None when none did)."""
        return self._p.usage.get(node)

    def set_usage(self, node: str, usage: Resources) -> None:
        """Set a node's projected usage; the first value set is the "before" of the report."""
        self._p.usage_before.setdefault(node, usage)
        self._p.usage[node] = usage

    @property
    def evicted(self) -> tuple[objects.Pod, ...]:
        """Pods evicted this cycle (dry-run included), in order."""
        return tuple(self._p.evicted.values())

    def is_evicted(self, pod: objects.Pod) -> bool:
        return pod.uid in self._p.evicted

    def record_eviction(
        self,
        pod: objects.Pod,
        destination: str | None = None,
        usage: Resources | None = None,
    ) -> None:
        """Project one eviction: the pod leaves its node, optionally lands on `destination`.

        `usage` (the pod's measured usage) is taken off the source's projected
        usage and added to the destination's, where a plugin set those. The
        evictor calls this for every eviction it admits and the backend accepts.
        """
        p = self._p
        if pod.uid in p.evicted:
            raise ValueError(f"pod {pod.key} is already recorded as evicted this cycle")
        source = pod.node_name
        if consumes_resources(pod):
            # (requested - pod.requests - one pod).clamp_min(0), and + at the
            # destination, each as one Resources instead of three.
            left = _shifted(self.requested(source), pod.requests, -1)
            p.requests[source] = Resources({n: max(v, 0) for n, v in left.items()})
            if destination:
                p.requests[destination] = Resources(
                    _shifted(self.requested(destination), pod.requests, 1)
                )
        p.touched.add(source)
        if destination:
            p.touched.add(destination)
            p.arrivals.setdefault(destination, []).append(pod)
        if usage is not None:
            if source in p.usage:
                p.usage[source] = (p.usage[source] - usage).clamp_min(0)
            if destination and destination in p.usage:
                p.usage[destination] = p.usage[destination] + usage
        if is_healthy(pod):
            for pdb in self.pdbs_covering(pod):
                p.pdb_used[pdb.key] = p.pdb_used.get(pdb.key, 0) + 1
        p.evicted[pod.uid] = pod

    def projections(self) -> tuple[NodeProjection, ...]:
        """Before/after for every node an eviction touched or a plugin set usage on."""
        p = self._p
        out = []
        for node in sorted(p.touched.union(p.usage)):
            out.append(
                NodeProjection(
                    node=node,
                    requests_before=self._base_requests(node),
                    requests_after=self.requested(node),
                    usage_before=p.usage_before.get(node),
                    usage_after=p.usage.get(node),
                )
            )
        return tuple(out)


def _shifted(base: Mapping[str, int], requests: Mapping[str, int], sign: int) -> dict[str, int]:
    """base + sign * (requests + one pod), name by name (missing names count as 0)."""
    merged = dict(base)
    for name, amount in requests.items():
        merged[name] = merged.get(name, 0) + sign * amount
    merged[quantity.PODS] = merged.get(quantity.PODS, 0) + sign
    return merged


def _by_owner(pods: Iterable[objects.Pod]) -> dict[str, tuple[objects.Pod, ...]]:
    """Pods by `owner_uid`, each group in the order given."""
    by_owner: dict[str, list[objects.Pod]] = {}
    for pod in pods:
        uid = owner_uid(pod)
        if uid is not None:
            by_owner.setdefault(uid, []).append(pod)
    return {k: tuple(v) for k, v in by_owner.items()}


def _select(
    nodes: tuple[objects.Node, ...], selector: selectors.LabelSelector | None
) -> tuple[objects.Node, ...]:
    chosen = (n for n in nodes if n.ready and (selector is None or selector.matches(n.labels)))
    return tuple(sorted(chosen, key=lambda n: n.name))
