"""The checks waiting cannot change: may this pod be migrated at all?

Koordinator's MigrationController filter is its evictor filter (the
DefaultEvictor-like protections) plus `namespaces`, the eviction-cost veto and
the expected-replicas check. Here the protections are DefaultEvictor's own
(`plugins.defaultevictor`), built from the MigrationControllerArgs fields
Koordinator maps onto it (`evictLocalStoragePods`, `evictSystemCriticalPods`,
`ignorePvcPods`, `evictFailedBarePods`, `evictAllBarePods`, `labelSelector`,
`priorityThreshold`, `nodeFit`, `nodeSelector`), with `skipEvictionGates`
lifting the ones they name. The `descheduler.alpha.kubernetes.io/evict`
annotation lifts what it lifts in DefaultEvictor, and the expected-replicas
check; never the migration limits (Koordinator let it skip those too, which
makes one annotation able to take a whole workload down at once).

A job whose pod fails one of these checks at arbitration fails at once with
`ForbiddenMigratePod`; the filter refuses the pod for the cycle.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from descheduler.framework import ClusterState, Handle, Refusal, Snapshot
from descheduler.plugins.defaultevictor import protections
from descheduler.plugins.defaultevictor.args import DefaultEvictorArgs
from descheduler.plugins.defaultevictor.plugin import DefaultEvictor
from descheduler.plugins.lownodeload import order
from descheduler.plugins.migrationcontroller.args import EvictionGate, MigrationControllerArgs
from kube import objects

NEVER_EVICT_COST = 2**31 - 1  # scheduling.koordinator.sh/eviction-cost: math.MaxInt32
# Stands in for an owner while DefaultEvictor judges a bare pod under evictAllBarePods.
_STAND_IN_OWNER = objects.OwnerReference("evictAllBarePods", "-", "-", False)


def evictor_args(args: MigrationControllerArgs) -> DefaultEvictorArgs:
    """The DefaultEvictor Koordinator builds from MigrationControllerArgs (gates applied)."""
    skipped = frozenset(args.skip_eviction_gates)
    return DefaultEvictorArgs(
        node_selector=args.node_selector,
        label_selector=None if EvictionGate.LABEL_SELECTOR in skipped else args.label_selector,
        priority_threshold=(
            None if EvictionGate.PRIORITY_THRESHOLD in skipped else args.priority_threshold
        ),
        node_fit=args.node_fit and EvictionGate.NODE_FIT not in skipped,
        evict_local_storage_pods=(
            args.evict_local_storage_pods or EvictionGate.LOCAL_STORAGE in skipped
        ),
        evict_system_critical_pods=(
            args.evict_system_critical_pods or EvictionGate.SYSTEM_CRITICAL in skipped
        ),
        ignore_pvc_pods=args.ignore_pvc_pods and EvictionGate.PVC not in skipped,
        evict_failed_bare_pods=(
            args.evict_failed_bare_pods
            or args.evict_all_bare_pods
            or EvictionGate.BARE_PODS in skipped
        ),
    )


class StaticChecks:
    """The non-retryable checks of one MigrationController."""

    def __init__(
        self,
        args: MigrationControllerArgs,
        handle: Handle,
        priority_class: Callable[[str], int | None],
    ) -> None:
        skipped = frozenset(args.skip_eviction_gates)
        self._handle = handle
        self._priority_class = priority_class
        self._threshold_name = args.priority_threshold.name if args.priority_threshold else ""
        self._namespaces = None if EvictionGate.NAMESPACES in skipped else args.namespaces
        self._all_bare_pods = args.evict_all_bare_pods or EvictionGate.BARE_PODS in skipped
        # DefaultEvictor reads the cycle's snapshot; arbitration runs between cycles.
        self.evictor = DefaultEvictor(
            evictor_args(args), dataclasses.replace(handle, snapshot=self._snapshot)
        )

    def _snapshot(self) -> Snapshot:
        try:
            return self._handle.snapshot()
        except RuntimeError:  # no cycle running: only a named priority threshold needs data
            classes = {}
            if self._threshold_name:
                value = self._priority_class(self._threshold_name)
                if value is not None:
                    classes[self._threshold_name] = value
            state = ClusterState(priority_classes=classes)
            return Snapshot(state, taken_at=self._handle.clock())

    def problems(self, pod: objects.Pod) -> list[str]:
        """Every reason the pod may never be migrated (empty: it may be)."""
        found = []
        judged = pod
        if self._all_bare_pods and pod.is_bare:
            judged = dataclasses.replace(pod, owner_references=(_STAND_IN_OWNER,))
        refusal = self.evictor.filter(judged)
        if refusal is not None:
            found.append(refusal.detail)
        if self._namespaces is not None and not self._namespaces.allows(pod.namespace):
            found.append(f"namespace {pod.namespace} is excluded by namespaces")
        if order.cost(pod, order.ANNOTATION_EVICTION_COST) == NEVER_EVICT_COST:
            found.append(f"{order.ANNOTATION_EVICTION_COST} is {NEVER_EVICT_COST} (never evict)")
        return found

    def pre_eviction_filter(self, pod: objects.Pod) -> Refusal | None:
        """DefaultEvictor's: nodeFit, when `nodeFit` is on and not skipped."""
        return self.evictor.pre_eviction_filter(pod)

    @staticmethod
    def lifts_expected_replicas(pod: objects.Pod) -> bool:
        return protections.has_evict_annotation(pod.annotations)
