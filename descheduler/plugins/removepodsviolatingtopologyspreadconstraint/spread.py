"""Topology spread constraints as the scheduler counts them: domains, skew, admissible moves.

Pure functions and small value types; `plugin` builds one `Domains` per
distinct `Spread` of a namespace and asks `admits` about every move it
considers. The counting follows kube-scheduler's PodTopologySpread
(`podtopologyspread/common.go`, `filtering.go`), which the descheduler plugin
mirrors:

- A `Spread` is one pod's constraint with what it depends on: the label
  selector (merged with the pod's values for `matchLabelKeys`), and, per the
  node inclusion policies, the pod's nodeSelector and required node affinity
  (`nodeAffinityPolicy: Honor`, the default) and its tolerations
  (`nodeTaintsPolicy: Honor`; default Ignore).
- Eligible nodes carry the topology key and pass the inclusion policies; their
  key values are the domains, empty ones included. Only pods on eligible
  nodes count: same namespace as the constraint's pod, matching the selector,
  not terminating and not finished. Every such pod counts, evictable or not
  (upstream counts only evictable pods, so protected replicas make a domain
  look emptier than the scheduler sees it; PR #1918 review).
- The global minimum is the smallest domain count, or 0 when a DoNotSchedule
  constraint's `minDomains` exceeds the number of domains.
- A pod may go to a node when, with the pod taken out of its own domain, the
  destination domain's count + 1 - minimum <= maxSkew (the scheduler's
  filter). A hard (DoNotSchedule) constraint also needs the destination to
  carry the topology key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kube import constraints, objects, scheduling, selectors

__all__ = ["DO_NOT_SCHEDULE", "Domains", "Spread", "admits", "spreads_of"]

DO_NOT_SCHEDULE = "DoNotSchedule"
HONOR = "Honor"
_FINISHED = frozenset({"Succeeded", "Failed"})
_TAINT_EFFECTS = frozenset(
    {constraints.TaintEffect.NO_SCHEDULE, constraints.TaintEffect.NO_EXECUTE}
)


@dataclass(frozen=True, slots=True)
class Spread:
    """One topology spread constraint of a pod, with what deciding it depends on.

    Equal spreads (the pods of one workload) count the same pods over the same
    domains; `pod` is one of them, used to test node inclusion.
    """

    namespace: str
    topology_key: str
    max_skew: int
    when_unsatisfiable: str
    selector: selectors.LabelSelector
    match_labels: tuple[tuple[str, str], ...]
    min_domains: int | None
    node_selector: tuple[tuple[str, str], ...] | None  # None: nodeAffinityPolicy Ignore
    node_affinity: selectors.NodeSelector | None
    tolerations: tuple[constraints.Toleration, ...] | None  # None: nodeTaintsPolicy Ignore
    pod: objects.Pod = field(compare=False, hash=False, repr=False)

    @classmethod
    def of(cls, pod: objects.Pod, constraint: constraints.TopologySpreadConstraint) -> Spread:
        """The pod's constraint as counted for it."""
        honor_affinity = constraint.node_affinity_policy == HONOR
        honor_taints = constraint.node_taints_policy == HONOR
        return cls(
            namespace=pod.namespace,
            topology_key=constraint.topology_key,
            max_skew=constraint.max_skew,
            when_unsatisfiable=constraint.when_unsatisfiable,
            selector=constraint.label_selector,
            match_labels=tuple(
                (key, pod.labels[key]) for key in constraint.match_label_keys if key in pod.labels
            ),
            min_domains=constraint.min_domains,
            node_selector=tuple(sorted(pod.node_selector.items())) if honor_affinity else None,
            node_affinity=pod.required_node_affinity if honor_affinity else None,
            tolerations=pod.tolerations if honor_taints else None,
            pod=pod,
        )

    @property
    def hard(self) -> bool:
        """Whether the scheduler refuses nodes that break it (DoNotSchedule)."""
        return self.when_unsatisfiable == DO_NOT_SCHEDULE

    def counts(self, pod: objects.Pod) -> bool:
        """Whether `pod` counts towards this spread (wherever it runs)."""
        return (
            pod.namespace == self.namespace
            and self.selector.matches(pod.labels)
            and all(pod.labels.get(key) == value for key, value in self.match_labels)
        )

    def eligible(self, node: objects.Node) -> bool:
        """Whether the node has the topology key and passes the inclusion policies."""
        if self.topology_key not in node.labels:
            return False
        if self.node_selector is not None and not scheduling.matches_node_selector_and_affinity(
            self.pod, node
        ):
            return False
        if self.tolerations is not None:
            return not scheduling.untolerated_taints(self.pod, node, _TAINT_EFFECTS)
        return True

    def __str__(self) -> str:
        return (
            f"{self.topology_key} maxSkew {self.max_skew} {self.when_unsatisfiable}"
            f" selector {self.selector}"
        )


def spreads_of(pod: objects.Pod) -> tuple[Spread, ...]:
    """Every topology spread constraint of the pod, as `Spread`s."""
    return tuple(Spread.of(pod, c) for c in pod.topology_spread_constraints)


def _active(pod: objects.Pod) -> bool:
    return not pod.is_terminating and pod.phase not in _FINISHED


@dataclass(slots=True)
class Domains:
    """Pod counts per domain of one spread over the eligible nodes."""

    spread: Spread
    domain_of: dict[str, str]  # eligible node name -> domain
    counts: dict[str, int]  # every domain of an eligible node, empty ones included

    @classmethod
    def count(
        cls,
        spread: Spread,
        nodes: Iterable[objects.Node],
        pods_by_node: Mapping[str, Sequence[objects.Pod]],
    ) -> Domains:
        """Count the pods of `pods_by_node` (pods placed on each node) for the spread."""
        domain_of: dict[str, str] = {
            n.name: n.labels[spread.topology_key] for n in nodes if spread.eligible(n)
        }
        counts = dict.fromkeys(domain_of.values(), 0)
        for node, domain in domain_of.items():
            counts[domain] += sum(
                1 for p in pods_by_node.get(node, ()) if _active(p) and spread.counts(p)
            )
        return cls(spread, domain_of, counts)

    def minimum(self, counts: Mapping[str, int] | None = None) -> int:
        """The global minimum the skew is measured against."""
        counts = self.counts if counts is None else counts
        if not counts:
            return 0
        if self.spread.hard and (self.spread.min_domains or 0) > len(counts):
            return 0
        return min(counts.values())

    def violations(self) -> list[str]:
        """Domains above minimum + maxSkew, fullest first (ties by name)."""
        limit = self.minimum() + self.spread.max_skew
        over = [d for d, c in self.counts.items() if c > limit]
        return sorted(over, key=lambda d: (-self.counts[d], d))

    def without(self, pod: objects.Pod, node: str) -> dict[str, int]:
        """The counts with `pod` (placed on `node`) taken out."""
        counts = dict(self.counts)
        domain = self.domain_of.get(node)
        if domain is not None and self.spread.counts(pod):
            counts[domain] -= 1
        return counts

    def move(self, pod: objects.Pod, source: str, destination: str) -> None:
        """Project the pod's move from `source` to `destination` node."""
        if not self.spread.counts(pod):
            return
        before = self.domain_of.get(source)
        after = self.domain_of.get(destination)
        if before is not None:
            self.counts[before] -= 1
        if after is not None:
            self.counts[after] += 1


def admits(domains: Domains, pod: objects.Pod, source: str, destination: objects.Node) -> bool:
    """Whether moving `pod` from node `source` to `destination` keeps the spread within maxSkew.

    The scheduler's filter, with the pod taken out of its own domain: the
    destination domain's count, plus one when the pod matches the selector,
    may exceed the minimum by at most maxSkew. A move inside the pod's own
    domain changes nothing. A node without the topology key breaks a hard
    spread and is neutral to a soft one.
    """
    spread = domains.spread
    target = destination.labels.get(spread.topology_key)
    if target is None:
        return not spread.hard
    self_match = 1 if spread.counts(pod) else 0
    if self_match and domains.domain_of.get(source) == target:
        return True
    counts = domains.without(pod, source)
    return counts.get(target, 0) + self_match - domains.minimum(counts) <= spread.max_skew
