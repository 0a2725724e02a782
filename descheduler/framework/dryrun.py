"""What the Eviction API would answer, predicted from the snapshot, for dry runs.

A dry run writes nothing, yet should decide exactly like a real run
(docs/design.md, "Beyond the reference" 2). The one answer only the server knows is
the PodDisruptionBudget check, so it is predicted here the way the API
server's eviction handler decides (`pkg/registry/core/pod/storage/eviction.go`):

- pods that are Pending, Succeeded, Failed or already terminating skip the check;
- more than one budget covering the pod is an error (the server answers 500);
- a budget whose status is older than its spec refuses (429);
- an unready pod may go while the budget is healthy (`currentHealthy >=
  desiredHealthy`, policy IfHealthyBudget) or always (AlwaysAllow);
- otherwise a healthy pod needs `disruptionsAllowed`, minus the healthy pods
  this cycle already took from the budget, to be positive.
"""

from __future__ import annotations

from descheduler.framework.snapshot import Snapshot, is_healthy
from kube import eviction, objects

_UNGUARDED_PHASES = frozenset({"Pending", "Succeeded", "Failed"})


def predict(snapshot: Snapshot, pod: objects.Pod) -> eviction.Result:
    if pod.phase in _UNGUARDED_PHASES or pod.is_terminating:
        return eviction.Result(eviction.Outcome.EVICTED)
    budgets = snapshot.pdbs_covering(pod)
    if not budgets:
        return eviction.Result(eviction.Outcome.EVICTED)
    if len(budgets) > 1:
        names = ", ".join(b.name for b in budgets)
        return eviction.Result(
            eviction.Outcome.FAILED,
            f"pod is covered by more than one PodDisruptionBudget ({names})",
        )
    budget = budgets[0]
    if not budget.computed:
        return eviction.Result(
            eviction.Outcome.PDB_BLOCKED,
            f"PodDisruptionBudget {budget.name} status is not up to date (predicted)",
        )
    budget_healthy = budget.current_healthy >= budget.desired_healthy
    unhealthy_may_go = budget.unhealthy_pod_eviction_policy == "AlwaysAllow" or budget_healthy
    if not is_healthy(pod) and unhealthy_may_go:
        return eviction.Result(eviction.Outcome.EVICTED)
    if snapshot.disruptions_left(budget) <= 0:
        return eviction.Result(
            eviction.Outcome.PDB_BLOCKED,
            f"Cannot evict pod as it would violate the pod's disruption budget "
            f"{budget.name} (predicted)",
        )
    return eviction.Result(eviction.Outcome.EVICTED)
