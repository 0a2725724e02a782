"""Which pods DefaultEvictor protects: the effective protections and the per-pod checks.

Pure functions over the Args, a pod and the few facts the checks need, so each
rule is tested alone. Semantics follow kubernetes-sigs/descheduler
`pkg/framework/plugins/defaultevictor` (`getEffectivePodProtections`, the
constraint functions), with these nodeqos decisions:

- mirror, static and terminating pods are never evicted, and the
  `descheduler.alpha.kubernetes.io/evict` annotation does not change that, nor
  does it lift DaemonSet protection (upstream's annotation skips every check);
- system-critical also means priorityClassName system-cluster-critical or
  system-node-critical (a pod admitted without the Priority admission plugin
  has the name but no number);
- `PodsWithPVC` with `protectedStorageClasses` protects every pod with a PVC:
  the snapshot does not hold PVCs, so the storage class cannot be resolved, and
  protecting too much is the safe side.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Final

from descheduler.plugins.defaultevictor.args import (
    DEFAULT_PROTECTIONS,
    DefaultEvictorArgs,
    PodProtection,
)
from kube import objects

EVICT_ANNOTATION: Final = "descheduler.alpha.kubernetes.io/evict"
PREFER_NO_EVICTION_ANNOTATION: Final = "descheduler.alpha.kubernetes.io/prefer-no-eviction"
SYSTEM_CRITICAL_PRIORITY: Final = 2_000_000_000  # scheduling.SystemCriticalPriority
SYSTEM_PRIORITY_CLASSES: Final = frozenset({"system-cluster-critical", "system-node-critical"})


def effective_protections(args: DefaultEvictorArgs) -> frozenset[PodProtection]:
    """`podProtections` when either list is set, else the deprecated booleans."""
    chosen = args.pod_protections
    if chosen.extra_enabled or chosen.default_disabled:
        kept = {p for p in DEFAULT_PROTECTIONS if p not in chosen.default_disabled}
        return frozenset(kept | set(chosen.extra_enabled))
    legacy = {
        PodProtection.POD_WITH_LOCAL_STORAGE: not args.evict_local_storage_pods,
        PodProtection.DAEMON_SET_PODS: not args.evict_daemon_set_pods,
        PodProtection.SYSTEM_CRITICAL_PODS: not args.evict_system_critical_pods,
        PodProtection.FAILED_BARE_PODS: not args.evict_failed_bare_pods,
        PodProtection.PODS_WITH_PVC: args.ignore_pvc_pods,
        PodProtection.PODS_WITHOUT_PDB: args.ignore_pods_without_pdb,
    }
    return frozenset(p for p, on in legacy.items() if on)


def is_system_critical(pod: objects.Pod) -> bool:
    return (pod.priority is not None and pod.priority >= SYSTEM_CRITICAL_PRIORITY) or (
        pod.priority_class_name in SYSTEM_PRIORITY_CLASSES
    )


def never(pod: objects.Pod, protections: frozenset[PodProtection]) -> list[str]:
    """Checks no annotation overrides."""
    found = []
    if pod.is_mirror:
        found.append("mirror pod")
    if pod.is_static:
        found.append("static pod")
    if pod.is_terminating:
        found.append("pod is terminating")
    if PodProtection.DAEMON_SET_PODS in protections and pod.is_daemonset_pod:
        found.append("DaemonSet pod")
    return found


def optional(
    pod: objects.Pod,
    protections: frozenset[PodProtection],
    *,
    threshold: int | None,
    covered_by_pdb: bool,
) -> list[str]:
    """Protections the evict annotation lifts; `threshold` is the resolved priority threshold."""
    found = []
    if pod.is_bare:
        if PodProtection.FAILED_BARE_PODS in protections:
            found.append("bare pod (no owner)")
        elif pod.phase != "Failed":
            found.append("bare pod (no owner) not in Failed phase")
    if PodProtection.SYSTEM_CRITICAL_PODS in protections:
        if is_system_critical(pod):
            found.append(
                f"system-critical pod (priority {pod.priority}, "
                f"priorityClassName {pod.priority_class_name or '-'})"
            )
        elif threshold is not None and pod.priority is not None and pod.priority >= threshold:
            found.append(f"priority {pod.priority} is not below the threshold {threshold}")
    if PodProtection.POD_WITH_LOCAL_STORAGE in protections and pod.has_local_storage:
        found.append("pod has local storage (emptyDir or hostPath)")
    if PodProtection.PODS_WITH_PVC in protections and pod.has_pvc:
        found.append("pod has a PersistentVolumeClaim")
    if PodProtection.PODS_WITH_RESOURCE_CLAIMS in protections and pod.has_resource_claims:
        # upstream v0.34 (utils.IsPodWithResourceClaims: spec.resourceClaims not empty)
        found.append("pod has ResourceClaims")
    if PodProtection.PODS_WITHOUT_PDB in protections and not covered_by_pdb:
        found.append("no PodDisruptionBudget covers the pod")
    return found


def too_young(pod: objects.Pod, min_age: timedelta | None, now: datetime) -> str | None:
    """minPodAge, measured from `status.startTime` as upstream does (none yet: too young)."""
    if min_age is None:
        return None
    if pod.start_time is None:
        return f"pod has not started; minPodAge is {min_age}"
    age = now - pod.start_time
    if age < min_age:
        return f"pod age {age} is below minPodAge {min_age}"
    return None


def prefers_no_eviction(pod: objects.Pod) -> bool:
    return PREFER_NO_EVICTION_ANNOTATION in pod.annotations


def has_evict_annotation(annotations: Mapping[str, str]) -> bool:
    return EVICT_ANNOTATION in annotations
