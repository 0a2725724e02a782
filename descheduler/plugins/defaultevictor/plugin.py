"""DefaultEvictor: the filters (and evict step) every profile's evictor is built from.

- `filter(pod)`: the protections of `protections` (DaemonSet, system-critical,
  local storage, PVC, bare pods, PDB coverage), the priority threshold, the
  label selector, minReplicas and minPodAge, plus noEvictionPolicy Mandatory;
  the `descheduler.alpha.kubernetes.io/evict` annotation lifts the optional ones.
- `pre_eviction_filter(pod)`: nodeFit (the pod fits some other Ready node in the
  snapshot, with projected requests, so capacity taken by earlier moves counts)
  and namespaceLabelSelector.
- `evict(pod, options, backend)`: hands the pod to the framework's backend
  (Koordinator's configs may enable DefaultEvictor at the evict point).

Refusals carry every failed check in their detail, so a report tells the whole
story ("DaemonSet pod; pod has local storage").
"""

from __future__ import annotations

from descheduler.config import PluginArgs
from descheduler.evictions import Backend, EvictOptions
from descheduler.framework import Handle, Reason, Refusal, Snapshot
from descheduler.plugins.defaultevictor import protections as rules
from descheduler.plugins.defaultevictor.args import (
    DefaultEvictorArgs,
    NoEvictionPolicy,
    PodProtection,
)
from kube import eviction, objects, scheduling

NAME = "DefaultEvictor"
_FIT_REASONS_SHOWN = 3


class DefaultEvictor:
    """Upstream's DefaultEvictor on the nodeqos framework."""

    name = NAME

    def __init__(self, args: DefaultEvictorArgs, handle: Handle) -> None:
        self.args = args
        self._handle = handle
        self.protections = rules.effective_protections(args)

    # -- filter --------------------------------------------------------------------

    def filter(self, pod: objects.Pod) -> Refusal | None:
        problems = rules.never(pod, self.protections)
        if not rules.has_evict_annotation(pod.annotations):
            problems.extend(self._optional(pod))
        if not problems:
            return None
        return Refusal(Reason.FILTERED, "; ".join(problems), NAME)

    def _optional(self, pod: objects.Pod) -> list[str]:
        snapshot = self._handle.snapshot()
        args = self.args
        problems = []
        if args.no_eviction_policy is NoEvictionPolicy.MANDATORY and rules.prefers_no_eviction(pod):
            problems.append("prefer-no-eviction annotation with noEvictionPolicy Mandatory")
        threshold, threshold_problem = self._threshold(snapshot)
        if threshold_problem:
            problems.append(threshold_problem)
        covered = (
            bool(snapshot.pdbs_covering(pod))
            if PodProtection.PODS_WITHOUT_PDB in self.protections
            else True
        )
        problems.extend(
            rules.optional(pod, self.protections, threshold=threshold, covered_by_pdb=covered)
        )
        if args.label_selector is not None and not args.label_selector.matches(pod.labels):
            problems.append(f"labels do not match labelSelector {args.label_selector}")
        if args.min_replicas > 1 and not pod.is_bare:
            replicas = self._replicas(snapshot, pod)
            if replicas < args.min_replicas:
                problems.append(
                    f"owner has {replicas} replicas, fewer than minReplicas {args.min_replicas}"
                )
        young = rules.too_young(pod, args.min_pod_age, self._handle.clock())
        if young:
            problems.append(young)
        return problems

    def _threshold(self, snapshot: Snapshot) -> tuple[int | None, str | None]:
        """The priority threshold as a number; a name the cluster lacks protects everyone."""
        chosen = self.args.priority_threshold
        if chosen is None or PodProtection.SYSTEM_CRITICAL_PODS not in self.protections:
            return None, None  # upstream applies the threshold only with that protection
        if chosen.value is not None:
            return chosen.value, None
        if not chosen.name:
            return None, None
        value = snapshot.priority_class_value(chosen.name)
        if value is None:
            return None, f"priorityThreshold PriorityClass {chosen.name} does not exist"
        return value, None

    @staticmethod
    def _replicas(snapshot: Snapshot, pod: objects.Pod) -> int:
        ref = pod.workload_ref
        return 0 if ref is None else len(snapshot.pods_of_owner(ref.uid))

    # -- pre-eviction filter ---------------------------------------------------------

    def pre_eviction_filter(self, pod: objects.Pod) -> Refusal | None:
        snapshot = self._handle.snapshot()
        selector = self.args.namespace_label_selector
        if selector is not None and not selector.is_everything:
            labels = snapshot.namespace_labels(pod.namespace)
            if labels is None or not selector.matches(labels):
                return Refusal(
                    Reason.FILTERED,
                    f"namespace {pod.namespace} does not match namespaceLabelSelector {selector}",
                    NAME,
                )
        if self.args.node_fit:
            return self._fit(snapshot, pod)
        return None

    def _fit(self, snapshot: Snapshot, pod: objects.Pod) -> Refusal | None:
        """Upstream's PodFitsAnyOtherNode over the snapshot's Ready nodes."""
        misfits = []
        selector = self.args.node_selector
        for node in snapshot.nodes:
            if node.name == pod.node_name:
                continue
            if selector is not None and not selector.matches(node.labels):
                continue
            fit = scheduling.pod_fits_node(pod, node, snapshot.requested(node.name))
            if fit.ok:
                return None
            misfits.append(f"{node.name}: {', '.join(fit.reasons)}")
        if not misfits:
            return Refusal(Reason.NO_FIT, "no other ready node", NAME)
        shown = "; ".join(misfits[:_FIT_REASONS_SHOWN])
        more = len(misfits) - _FIT_REASONS_SHOWN
        return Refusal(
            Reason.NO_FIT,
            f"fits no other ready node ({shown}{f'; {more} more' if more > 0 else ''})",
            NAME,
        )

    # -- evict ----------------------------------------------------------------------

    def evict(self, pod: objects.Pod, options: EvictOptions, backend: Backend) -> eviction.Result:
        return backend.evict(pod, options)


def factory(args: PluginArgs, handle: Handle) -> DefaultEvictor:
    return DefaultEvictor(DefaultEvictorArgs.narrow(args, NAME), handle)
