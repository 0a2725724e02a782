"""Metric kinds the agent stores beyond metriccache's built-ins, and the registry
the agent opens its cache with.

Registered through metriccache's public `KindRegistry` API (the metric cache
package stays free of agent concerns). `registry()` is what `agent.assembly`
passes to `MetricCache.open`; tests use it for their in-memory caches too.
"""

from __future__ import annotations

from metriccache import KindRegistry, MetricKind, kinds

# How many CPUs the best-effort QoS group's cpuset allows (the `cpuset` policy of
# CPU suppression shrinks it); `kinds.BE_CPU_QUOTA` holds the effective grant.
BE_CPUSET_CPUS = MetricKind("be_cpuset_cpus", (), kinds.NODE_RETENTION_SECONDS, "cpus")
# Pressure stall information of one pod (PSICollector gate), like NODE_PSI:
# resource is cpu|memory|io, kind is some|full, the value is avg10 in percent.
POD_PSI = MetricKind(
    "pod_psi", (kinds.POD_UID, "resource", "kind"), kinds.POD_RETENTION_SECONDS, "percent"
)

AGENT_KINDS: tuple[MetricKind, ...] = (BE_CPUSET_CPUS, POD_PSI)


def registry() -> KindRegistry:
    """metriccache's default kinds plus the agent's own."""
    found = kinds.default_registry()
    for kind in AGENT_KINDS:
        found.register(kind)
    return found
