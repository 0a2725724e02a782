"""The maths of CPU burst, from koordlet's `plugins/cpuburst/cpu_burst.go`.

- cpu burst (policies cpuBurstOnly, auto): a container's `cpu.cfs_burst_us`
  (`cpu.max.burst` on v2) = limit (cores) * cpuBurstPercent / 100 * 100000 µs,
  capped at its current quota (some v2 kernels refuse burst > quota); the pod's
  burst is the sum of its containers'.
- cfs quota burst (policies cfsQuotaBurstOnly, auto): a throttled container's
  quota grows by x1.2 per tick, up to limit * cfsQuotaBurstPercent / 100, and
  shrinks by x0.8 back towards the limit when the node's share pool is busy:
  share pool usage >= sharePoolThresholdPercent is overload (scale down),
  at least 90% of it is cooling (no growth), below is idle.
- an optional token bucket (cfsQuotaBurstPeriodSeconds >= 0) stops a container
  from running above its limit for long.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

CFS_PERIOD_US = 100_000  # kubelet's default cfs period, which koordlet assumes
COOLING_RATIO = 0.9
LIMITER_CONSUME_PERCENT = 100
LIMITER_SAVE_PERCENT = 60

NONE = "none"
CPU_BURST_ONLY = "cpuBurstOnly"
CFS_QUOTA_BURST_ONLY = "cfsQuotaBurstOnly"
AUTO = "auto"


class NodeState(enum.Enum):
    OVERLOAD = "overload"
    COOLING = "cooling"
    IDLE = "idle"
    UNKNOWN = "unknown"


class Operation(enum.Enum):
    SCALE_UP = "scale_up"
    SCALE_DOWN = "scale_down"
    REMAIN = "remain"
    RESET = "reset"


def cpu_burst_enabled(policy: str) -> bool:
    return policy in (CPU_BURST_ONLY, AUTO)


def cfs_quota_burst_enabled(policy: str) -> bool:
    return policy in (CFS_QUOTA_BURST_ONLY, AUTO)


def container_burst_us(
    limit_millis: int, burst_percent: int, policy: str, current_quota_us: int | None
) -> int:
    """The container's cfs burst: 0 when the policy has none or the CPU is unlimited."""
    if not cpu_burst_enabled(policy) or limit_millis <= 0:
        return 0
    # limit/1000 cores * percent/100 * 100000 µs, in integers
    burst = limit_millis * burst_percent * CFS_PERIOD_US // 100_000
    if current_quota_us is not None and current_quota_us > 0:
        burst = min(burst, current_quota_us)
    return burst


def base_quota_us(limit_millis: int) -> int:
    """The quota kubelet gives a container with this CPU limit."""
    return limit_millis * CFS_PERIOD_US // 1000


def node_state(share_usage: float, share_total: float, threshold_percent: int) -> NodeState:
    """How busy the share pool (CPUs not held by LSE/LSR pods) is."""
    ratio = share_usage / share_total if share_total > 0 else 1.0
    threshold = threshold_percent / 100
    if ratio >= threshold:
        return NodeState.OVERLOAD
    if ratio >= threshold * COOLING_RATIO:
        return NodeState.COOLING
    return NodeState.IDLE


def adjust_for_node(state: NodeState, operation: Operation) -> Operation:
    """A busy node turns growth into shrinking; an uncertain one holds still."""
    if state is NodeState.OVERLOAD and operation in (Operation.SCALE_UP, Operation.REMAIN):
        return Operation.SCALE_DOWN
    if state in (NodeState.COOLING, NodeState.UNKNOWN) and operation is Operation.SCALE_UP:
        return Operation.REMAIN
    return operation


def next_quota(operation: Operation, current_us: int, base_us: int, ceil_percent: int) -> int:
    """The container's next quota, within [base, base * cfsQuotaBurstPercent / 100]."""
    ceiling = base_us * ceil_percent // 100 if ceil_percent > 100 else base_us
    if operation is Operation.SCALE_UP:
        target = current_us * 6 // 5
    elif operation is Operation.SCALE_DOWN:
        target = current_us * 4 // 5
    elif operation is Operation.RESET:
        target = base_us
    else:
        target = current_us
    return max(base_us, min(target, ceiling))


class BurstLimiter:
    """Token bucket over "percent of limit used x seconds" (koordlet's burstLimiter).

    Capacity is period * (cfsQuotaBurstPercent - 100); running above the limit
    consumes, running below 60% of it saves. Starts a quarter full (koordlet
    starts at a random fill below half; deterministic here for tests).
    """

    def __init__(self, period_seconds: int, max_percent: int, clock: Callable[[], float]) -> None:
        self.capacity = period_seconds * (max_percent - 100)
        self.tokens = self.capacity / 4
        self._clock = clock
        self._last = clock()

    def allow(self, usage_percent: float) -> bool:
        """Account the time since the last call at `usage_percent`; True while tokens remain."""
        now = self._clock()
        elapsed, self._last = now - self._last, now
        if usage_percent >= LIMITER_CONSUME_PERCENT:
            self.tokens -= (usage_percent - 100) * elapsed
        elif usage_percent < LIMITER_SAVE_PERCENT:
            self.tokens += (100 - usage_percent) * elapsed
        self.tokens = max(min(self.tokens, self.capacity), -self.capacity)
        return self.tokens > 0

    def idle_for(self) -> float:
        """Seconds since the limiter was last consulted."""
        return self._clock() - self._last
