"""What RemoveFailedPods reads from a failed pod: age, failure reasons, exit codes. Pure.

kubernetes-sigs/descheduler `pkg/framework/plugins/removefailedpods/failedpods.go`
(`validateCanEvict`):

- age is whole seconds since `creationTimestamp`; a pod younger than
  `minPodLifetimeSeconds` stays (a pod without a timestamp is treated as new);
- reasons are the containers' waiting and terminated reasons plus the pod's
  `status.reason` (init containers too with `includingInitContainers`);
- exit codes are those of terminated containers (same init rule);
- `excludeOwnerKinds` keeps a pod any of whose owner references has that kind.

`eviction_key` orders candidates oldest first, then namespace, name, UID.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from descheduler.plugins import _podstatus
from kube import objects

FAILED = "Failed"

# Shared with PodLifeTime (`_podstatus`); RemoveFailedPods' own rules follow.
EvictionKey = _podstatus.EvictionKey
matched_reason = _podstatus.matched_reason
matched_exit_code = _podstatus.matched_exit_code
eviction_key = _podstatus.oldest_first


def age_seconds(pod: objects.Pod, now: datetime) -> int:
    """Whole seconds since creation (no timestamp: very old); 0 when created in the future."""
    age = _podstatus.age_seconds(pod, now)
    return 0 if age is None else age


def excluded_owner(pod: objects.Pod, kinds: Collection[str]) -> str | None:
    """The first owner kind listed in `kinds`, or None."""
    return next((ref.kind for ref in pod.owner_references if ref.kind in kinds), None)
