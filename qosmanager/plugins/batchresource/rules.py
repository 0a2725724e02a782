"""The cgroup values of a Batch or Mid pod: pure functions of its extended resources and the node.

Koordinator's `BatchResource` runtime hook
(`pkg/koordlet/runtimehooks/hooks/batchresource/batch_resource.go` and `rule.go`):
a pod labelled `koordinator.sh/qosClass: BE` runs as a Kubernetes BestEffort pod
(the colocation profile moved its cpu/memory into the extended resources
`kubernetes.io/batch-cpu`, in millicores, and `kubernetes.io/batch-memory`, in
bytes), so kubelet gives it no shares, no quota and no memory limit. The hook
sets them from the batch resources:

    container  cpu.shares  = milli_cpu_to_shares(batch-cpu request, or 0)
               cfs quota   = milli_cpu_to_quota(batch-cpu limit, or 0)   (0 -> unlimited)
               memory      = batch-memory limit, unlimited when absent or <= 0
    pod        cpu.shares  = milli_cpu_to_shares(sum of the containers' positive requests)
               cfs quota   = milli_cpu_to_quota(sum of limits), unlimited if any
                             container has no batch-cpu limit
               memory      = sum of batch-memory limits, unlimited if any container has none

    milli_cpu_to_shares(m) = clamp(m * 1024 // 1000, 2, 262144)   (2 when m <= 0)
    milli_cpu_to_quota(m)  = m * 100 (µs per 100 ms period); unlimited when <= 0; at least 1000

Only containers that name a batch resource take part ("the extended resource
spec"); it comes from the containers' resources, else from the pod annotation
`node.koordinator.sh/extended-resource-spec`. A pod with neither is left alone.

Two node-wide rules change the quota: with BE CPU suppression on and its policy
`cfsQuota`, Batch quotas are unset (the besteffort QoS dir's quota then limits
them, and v1 refuses a child quota above its parent's); a node annotated
`node.koordinator.sh/cpu-normalization-ratio` > 1 divides every quota by the
ratio, rounding up.

Mid pods get the same values from `kubernetes.io/mid-cpu` / `mid-memory`: a pod whose
Koordinator priority class is `koord-mid` (label `koordinator.sh/priority-class`, else
its `spec.priority` band) and which is not labelled BE. A profile that maps a pod to
koord-mid moves its cpu/memory into the mid resources just as it does for batch, so
kubelet sees a BestEffort pod here too. Koordinator's koordlet sets nothing for them
(its hook reads the BE label and the batch names only; docs/deviations.md `mid-cgroups`).

Memory limits are rounded down to whole pages, as the kernel stores them, so a
read-back compares equal (Koordinator writes the raw bytes; the kernel's result
is the same).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass

from kube import classify, nodeslo, objects, quantity
from qosmanager import states as qstates

BATCH_CPU = "kubernetes.io/batch-cpu"
BATCH_MEMORY = "kubernetes.io/batch-memory"
MID_CPU = "kubernetes.io/mid-cpu"
MID_MEMORY = "kubernetes.io/mid-memory"
ANNOTATION_EXTENDED_RESOURCE_SPEC = "node.koordinator.sh/extended-resource-spec"
ANNOTATION_CPU_NORMALIZATION_RATIO = "node.koordinator.sh/cpu-normalization-ratio"

SHARES_MIN = 2
SHARES_MAX = 262144
SHARES_PER_CPU = 1024
CFS_PERIOD_US = 100_000
CFS_QUOTA_MIN_US = 1000
PAGE = 4096


@dataclass(frozen=True, slots=True)
class Tier:
    """The extended resources a pod of one colocation tier asks its cpu and memory in."""

    cpu: str
    memory: str


BATCH = Tier(BATCH_CPU, BATCH_MEMORY)
MID = Tier(MID_CPU, MID_MEMORY)


@dataclass(frozen=True, slots=True)
class BatchContainer:
    """The batch resources one container names (requests and limits, batch names only)."""

    requests: quantity.Resources
    limits: quantity.Resources


@dataclass(frozen=True, slots=True)
class CgroupValues:
    """What one cgroup gets: shares, quota in µs (None = unlimited), memory (None = unlimited)."""

    cpu_shares: int
    cfs_quota_us: int | None
    memory_limit: int | None


@dataclass(frozen=True, slots=True)
class QuotaRule:
    """The node-wide quota rule: whether Batch quotas are set at all, and the scale ratio."""

    enabled: bool = True
    ratio: float | None = None  # cpu normalization ratio; applied only when > 1

    def scale(self, quota: int | None) -> int | None:
        if not self.enabled:
            return None
        if quota is not None and self.ratio is not None and self.ratio > 1.0:
            return math.ceil(quota / self.ratio)
        return quota


def milli_cpu_to_shares(milli: int) -> int:
    """cpu.shares for a CPU request in millicores (Koordinator's `MilliCPUToShares`)."""
    if milli <= 0:
        return SHARES_MIN
    return min(max(milli * SHARES_PER_CPU // 1000, SHARES_MIN), SHARES_MAX)


def milli_cpu_to_quota(milli: int) -> int | None:
    """CFS quota (µs per 100 ms) for a CPU limit in millicores; None means unlimited."""
    quota = milli * CFS_PERIOD_US // 1000
    if quota <= 0:
        return None
    return max(quota, CFS_QUOTA_MIN_US)


def is_batch_pod(pod: objects.Pod) -> bool:
    """The pod's `koordinator.sh/qosClass` label says BE (the label only, as Koordinator)."""
    return pod.labels.get(classify.LABEL_QOS_CLASS) == classify.KoordQOS.BE.value


def tier_of(pod: objects.Pod) -> Tier | None:
    """BATCH for a pod labelled BE, MID for another koord-mid pod, else None."""
    if is_batch_pod(pod):
        return BATCH
    if pod.koord_priority_class is classify.PriorityClass.MID:
        return MID
    return None


def _only(resources: Mapping[str, int], tier: Tier) -> quantity.Resources:
    return quantity.Resources({k: v for k, v in resources.items() if k in (tier.cpu, tier.memory)})


def batch_spec(pod: qstates.PodMeta, tier: Tier = BATCH) -> dict[str, BatchContainer] | None:
    """Container name -> its resources of `tier`; None when the pod names none.

    From the container specs when any names a resource of the tier, else from the
    extended-resource-spec annotation (a malformed annotation counts as absent).
    """
    spec: dict[str, BatchContainer] = {}
    for container in pod.pod.containers:
        requests, limits = _only(container.requests, tier), _only(container.limits, tier)
        if requests or limits:
            spec[container.name] = BatchContainer(requests, limits)
    if spec:
        return spec
    raw = pod.pod.annotations.get(ANNOTATION_EXTENDED_RESOURCE_SPEC)
    return _spec_from_annotation(raw, tier)


def _spec_from_annotation(raw: str | None, tier: Tier) -> dict[str, BatchContainer] | None:
    if not raw:
        return None
    try:
        containers = json.loads(raw).get("containers")
        spec = {
            str(name): BatchContainer(
                _only(quantity.Resources.from_api(c.get("requests")), tier),
                _only(quantity.Resources.from_api(c.get("limits")), tier),
            )
            for name, c in containers.items()
        }
    except (ValueError, AttributeError, TypeError):
        return None
    return spec or None


def container_values(batch: BatchContainer, rule: QuotaRule, tier: Tier = BATCH) -> CgroupValues:
    """The values of one container's cgroup."""
    memory = batch.limits.get(tier.memory, 0)
    return CgroupValues(
        cpu_shares=milli_cpu_to_shares(max(batch.requests.get(tier.cpu, 0), 0)),
        cfs_quota_us=rule.scale(milli_cpu_to_quota(max(batch.limits.get(tier.cpu, 0), 0))),
        memory_limit=_page(memory) if memory > 0 else None,
    )


def pod_values(
    spec: Mapping[str, BatchContainer], rule: QuotaRule, tier: Tier = BATCH
) -> CgroupValues:
    """The values of the pod's cgroup: sums over the containers of `spec`."""
    request = sum(max(c.requests.get(tier.cpu, 0), 0) for c in spec.values())
    cpu_limits = [c.limits.get(tier.cpu, 0) for c in spec.values()]
    memory_limits = [c.limits.get(tier.memory, 0) for c in spec.values()]
    cpu_limit = sum(cpu_limits) if all(v > 0 for v in cpu_limits) else 0
    memory = sum(memory_limits) if all(v > 0 for v in memory_limits) else 0
    return CgroupValues(
        cpu_shares=milli_cpu_to_shares(request),
        cfs_quota_us=rule.scale(milli_cpu_to_quota(cpu_limit)),
        memory_limit=_page(memory) if memory > 0 else None,
    )


def _page(n: int) -> int:
    return max(n // PAGE * PAGE, PAGE)


def quota_rule(slo: nodeslo.NodeSLOSpec, node: objects.Node | None) -> QuotaRule:
    """The quota rule of the node: from its NodeSLO (suppress policy) and annotation (ratio)."""
    thresholds = slo.thresholds
    suppress_by_quota = bool(thresholds.enable) and thresholds.cpu_suppress_policy == "cfsQuota"
    ratio = None
    raw = node.annotations.get(ANNOTATION_CPU_NORMALIZATION_RATIO) if node else None
    if raw:
        try:
            value = float(raw)
        except ValueError:
            value = -1.0
        ratio = value if math.isfinite(value) and value > 0 else None  # <= 0 is refused
    return QuotaRule(enabled=not suppress_by_quota, ratio=ratio)
