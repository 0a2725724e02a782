"""Which node taints RemovePodsViolatingNodeTaints holds a pod to: a pure `TaintFilter`.

Follows kubernetes-sigs/descheduler
`pkg/framework/plugins/removepodsviolatingnodetaints/node_taint.go` (`New`):

- a taint counts when its effect is NoSchedule, or PreferNoSchedule with
  `includePreferNoSchedule`. NoExecute is left out on purpose: the kubelet's
  taint manager already evicts pods that do not tolerate it;
- `excludedTaints` and `includedTaints` name a taint by its key or by
  "key=value" (the second form only matches a taint that has a value);
- no `includedTaints` means every taint is included.
"""

from __future__ import annotations

from dataclasses import dataclass

from kube import objects, scheduling
from kube.constraints import Taint, TaintEffect


def names(taint: Taint) -> tuple[str, ...]:
    """The names a taint is listed under in `includedTaints`/`excludedTaints`."""
    if taint.value:
        return (taint.key, f"{taint.key}={taint.value}")
    return (taint.key,)


@dataclass(frozen=True, slots=True)
class TaintFilter:
    """The effects that count, and the taint names included (empty: all) and excluded."""

    effects: frozenset[str]
    included: frozenset[str] = frozenset()  # empty: every taint
    excluded: frozenset[str] = frozenset()

    @classmethod
    def build(
        cls,
        *,
        include_prefer_no_schedule: bool,
        included: tuple[str, ...] = (),
        excluded: tuple[str, ...] = (),
    ) -> TaintFilter:
        effects = {TaintEffect.NO_SCHEDULE.value}
        if include_prefer_no_schedule:
            effects.add(TaintEffect.PREFER_NO_SCHEDULE.value)
        return cls(frozenset(effects), frozenset(included), frozenset(excluded))

    def counts(self, taint: Taint) -> bool:
        """Whether the pod must tolerate this taint to stay."""
        if taint.effect not in self.effects:
            return False
        listed = names(taint)
        if any(name in self.excluded for name in listed):
            return False
        return not self.included or any(name in self.included for name in listed)

    def untolerated(self, pod: objects.Pod, node: objects.Node) -> tuple[Taint, ...]:
        """The node's counted taints the pod does not tolerate, in the node's order."""
        return tuple(
            t
            for t in node.taints
            if self.counts(t) and not scheduling.tolerates(pod.tolerations, t)
        )
