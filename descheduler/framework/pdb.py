"""A slim, immutable view of a PodDisruptionBudget (`policy/v1`).

The snapshot keeps these so filters can ask "is this pod covered?" (upstream's
`PodsWithoutPDB` protection) and so a dry run can predict what the Eviction API
would answer (see `dryrun`). Only the fields those questions need are kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kube import objects, selectors


@dataclass(frozen=True, slots=True, kw_only=True)
class DisruptionBudget:
    """What the disruption controller last computed for one budget."""

    namespace: str
    name: str
    selector: selectors.LabelSelector
    generation: int = 0
    observed_generation: int = 0
    disruptions_allowed: int = 0
    current_healthy: int = 0
    desired_healthy: int = 0
    expected_pods: int = 0
    unhealthy_pod_eviction_policy: str = "IfHealthyBudget"

    @classmethod
    def from_api(cls, obj: Mapping[str, Any]) -> DisruptionBudget:
        """Parse a policy/v1 PodDisruptionBudget dict.

        policy/v1 semantics: a missing selector selects nothing, an empty one
        every pod of the namespace (`selectors.LabelSelector.from_api`).
        """
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        return cls(
            namespace=meta.get("namespace", ""),
            name=meta.get("name", ""),
            selector=selectors.LabelSelector.from_api(spec.get("selector"), "spec.selector"),
            generation=int(meta.get("generation", 0)),
            observed_generation=int(status.get("observedGeneration", 0)),
            disruptions_allowed=int(status.get("disruptionsAllowed", 0)),
            current_healthy=int(status.get("currentHealthy", 0)),
            desired_healthy=int(status.get("desiredHealthy", 0)),
            expected_pods=int(status.get("expectedPods", 0)),
            unhealthy_pod_eviction_policy=spec.get("unhealthyPodEvictionPolicy")
            or "IfHealthyBudget",
        )

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def computed(self) -> bool:
        """The status reflects the current spec (the API server refuses evictions until then)."""
        return self.observed_generation >= self.generation

    def covers(self, pod: objects.Pod) -> bool:
        """Whether the budget selects the pod."""
        return pod.namespace == self.namespace and self.selector.matches(pod.labels)
