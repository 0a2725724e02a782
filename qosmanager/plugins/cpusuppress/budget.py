"""The maths of CPU suppression: the BE budget, the cfs quota step, the cpuset choice.

Pure functions over millicores and microseconds, from Koordinator's koordlet
(`pkg/koordlet/qosmanager/plugins/cpusuppress/cpu_suppress.go`):

    budget(BE) = capacity * cpuSuppressThresholdPercent / 100
                 - usage(non-BE pods)
                 - max(system usage, node reserved)

where system usage = node usage - usage(all pods), floored at 0, and the budget
is raised to capacity * cpuSuppressMinPercent / 100 when that is set.

cfsQuota policy: quota = budget * period, never below 2000 µs; no write when the
change is smaller than 1% of the node's CPUs per period (unless pinning the
minimum); growth per tick at most 10% of the node's CPUs per period once a
quota is set. cpuset policy: ceil(budget) CPUs, at least 2, growing by at most
ceil(10% of the CPUs) per tick.
"""

from __future__ import annotations

import math

BE_MIN_QUOTA_US = 2000
BE_MIN_CPUSET_CPUS = 2
# 1% of the node's CPU time per period: smaller changes are not worth a write
MIN_DELTA_DIVISOR = 100
# 10% of the node's CPU time per period: scale up slowly
MAX_INCREASE_DIVISOR = 10


def system_usage(node_millis: int, all_pods_millis: int) -> int:
    """What the node uses outside pods (host applications count here), at least 0."""
    return max(node_millis - all_pods_millis, 0)


def be_budget(
    *,
    capacity_millis: int,
    threshold_percent: int,
    non_be_pods_millis: int,
    system_millis: int,
    reserved_millis: int,
    min_percent: int | None = None,
) -> int:
    """CPU (millicores) best-effort pods may use; negative when there is none to give."""
    budget = (
        capacity_millis * threshold_percent // 100
        - non_be_pods_millis
        - max(system_millis, reserved_millis)
    )
    if min_percent is not None:
        budget = max(budget, capacity_millis * min_percent // 100)
    return budget


def cfs_quota(
    budget_millis: int, current_us: int | None, *, capacity_millis: int, period_us: int
) -> int | None:
    """The BE cgroup's next cfs quota (µs), or None when no write is due.

    `current_us` None means unlimited (the quota was never set or was recovered).
    """
    target = max(budget_millis * period_us // 1000, BE_MIN_QUOTA_US)
    if current_us is None:
        return target
    node_period = capacity_millis * period_us // 1000  # node CPU time per period
    if abs(target - current_us) < node_period / MIN_DELTA_DIVISOR and target != BE_MIN_QUOTA_US:
        return None
    max_step = node_period // MAX_INCREASE_DIVISOR
    if target - current_us > max_step:
        target = current_us + max_step
    return target


def cpuset_size(budget_millis: int, current_size: int, available: int) -> int:
    """How many CPUs the BE cpuset gets: ceil(budget), >= 2, slow growth, <= available."""
    size = max(math.ceil(budget_millis / 1000), BE_MIN_CPUSET_CPUS)
    step = math.ceil(available / MAX_INCREASE_DIVISOR)
    if current_size and size - current_size > step:
        size = current_size + step
    return min(size, available)


def choose_cpus(available: frozenset[int], count: int, avoid: frozenset[int]) -> frozenset[int]:
    """`count` CPUs for BE pods: highest-numbered first, CPUs in `avoid` last.

    Kubelet's static CPU manager and koord-scheduler hand out exclusive CPUs
    from the lowest numbers, so the highest ones are the least likely to be
    shared with latency-sensitive pods; `avoid` holds CPUs pinned to LSR pods.
    """
    preferred = sorted(available - avoid, reverse=True)
    fallback = sorted(available & avoid, reverse=True)
    return frozenset((preferred + fallback)[:count])
