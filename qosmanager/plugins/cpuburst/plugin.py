"""CPUBurst: cfs burst and throttle-driven quota scaling for LS pods (gate `CPUBurst`).

The NodeSLO `cpuBurstStrategy.policy` is the second gate: `none` turns both
mechanisms off and resets what they changed (burst 0, quota back to the limit),
as koordlet does every tick. Pods considered are the CPU-burstable ones:
active pods whose Koordinator QoS is neither LSE, LSR nor BE. Container
directories come from `PodMeta.containers`; a kernel without cfs burst (v1
before 5.14) simply gets no burst files written.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import cgroups
from kube import classify, nodeslo
from metriccache import kinds
from qosmanager import features
from qosmanager import states as qstates
from qosmanager.plugins import base
from qosmanager.plugins.cpuburst import burst

log = logging.getLogger(__name__)

NAME = features.CPU_BURST
_PINNED = (classify.KoordQOS.LSE, classify.KoordQOS.LSR)
_NOT_BURSTABLE = (*_PINNED, classify.KoordQOS.BE)


def _config(spec: nodeslo.CPUBurstStrategy | None) -> tuple[str, int, int, int, int]:
    """(policy, cpuBurstPercent, cfsQuotaBurstPercent, period seconds, share pool %)."""
    s = spec or nodeslo.CPUBurstStrategy()
    return (
        s.policy or burst.NONE,
        1000 if s.cpu_burst_percent is None else s.cpu_burst_percent,
        300 if s.cfs_quota_burst_percent is None else s.cfs_quota_burst_percent,
        -1 if s.cfs_quota_burst_period_seconds is None else s.cfs_quota_burst_period_seconds,
        50 if s.share_pool_threshold_percent is None else s.share_pool_threshold_percent,
    )


class CPUBurst(base.PeriodicStrategy):
    """The CPUBurst strategy."""

    name = NAME
    interval_flag = "--reconcile-interval-seconds"

    def __init__(self, handle: base.Handle | None = None, *, interval: float = 1.0) -> None:
        super().__init__(handle, interval=interval)
        self._limiters: dict[str, burst.BurstLimiter] = {}

    def tick(self) -> None:
        policy, burst_pct, quota_pct, period_s, pool_pct = _config(
            self.states.node_slo().cpu_burst_strategy
        )
        pods = self.states.pods()
        state = burst.NodeState.UNKNOWN
        if burst.cfs_quota_burst_enabled(policy):
            state = self.node_state(pods, pool_pct)
        for pod in pods:
            if pod.qos in _NOT_BURSTABLE or not pod.is_active:
                continue
            try:
                self._apply_burst(pod, policy, burst_pct)
                self._apply_quota_burst(pod, policy, quota_pct, period_s, state)
            except cgroups.CgroupGone:
                log.debug("%s: pod %s went away", NAME, pod.key)
        # forget limiters of containers not seen for two burst periods
        horizon = max(2 * period_s, 2 * self.interval, 1)
        for cid in [c for c, lim in self._limiters.items() if lim.idle_for() > horizon]:
            del self._limiters[cid]

    def node_state(self, pods: Sequence[qstates.PodMeta], pool_percent: int) -> burst.NodeState:
        """Share pool load over the last min(5 intervals, 10 s)."""
        node = self.states.node()
        window = min(5 * max(self.interval, self.handle.collect_interval), 10.0)
        used = self.average(kinds.NODE_CPU_USAGE, {}, window)
        if node is None or used is None:
            return burst.NodeState.UNKNOWN
        by_pod = self.average_by_pod(kinds.POD_CPU_USAGE, window)
        total = node.capacity.cpu / 1000
        usage = used.avg
        for pod in pods:
            if pod.qos in _PINNED:
                total -= pod.requests.cpu / 1000
            if pod.qos in _NOT_BURSTABLE:
                usage -= by_pod.get(pod.uid, 0.0)
        return burst.node_state(usage, total, pool_percent)

    def _apply_burst(self, pod: qstates.PodMeta, policy: str, percent: int) -> None:
        total = 0
        for c in pod.containers:
            if c.cgroup_dir is None:
                continue
            quota = _quota(self.handle.fs, c.cgroup_dir)
            value = burst.container_burst_us(c.limits.cpu, percent, policy, quota)
            if not self._set_burst(c.cgroup_dir, value):
                return
            total += value
        self._set_burst(pod.cgroup_dir, total)

    def _set_burst(self, rel_dir: cgroups.RelDir, value: int) -> bool:
        """False when the kernel has no cfs burst (nothing to do on this host)."""
        try:
            self.handle.executor.update(NAME, rel_dir, cgroups.Resource.CPU_BURST, value)
        except cgroups.Unsupported:
            return False
        return True

    def _apply_quota_burst(
        self,
        pod: qstates.PodMeta,
        policy: str,
        ceil_percent: int,
        period_s: int,
        state: burst.NodeState,
    ) -> None:
        for c in pod.containers:
            if c.cgroup_dir is None or c.id is None or not c.running or c.limits.cpu <= 0:
                continue
            current = _quota(self.handle.fs, c.cgroup_dir)
            if current is None or current <= 0:
                continue
            base_us = burst.base_quota_us(c.limits.cpu)
            operation = self._operation(pod, c, policy, ceil_percent, period_s)
            operation = burst.adjust_for_node(state, operation)
            target = burst.next_quota(operation, current, base_us, ceil_percent)
            if target == current:
                continue
            levels: list[list[tuple[cgroups.RelDir, cgroups.ResourceValue]]] = []
            pod_quota = _quota(self.handle.fs, pod.cgroup_dir)
            if pod_quota is not None and pod_quota > 0:
                levels.append([(pod.cgroup_dir, pod_quota + target - current)])
            levels.append([(c.cgroup_dir, target)])
            self.handle.executor.update_leveled(NAME, cgroups.Resource.CPU_QUOTA, levels)
            log.info(
                "%s: %s/%s quota %s -> %s (%s)",
                NAME,
                pod.key,
                c.name,
                current,
                target,
                operation.value,
            )

    def _operation(
        self,
        pod: qstates.PodMeta,
        container: qstates.ContainerMeta,
        policy: str,
        ceil_percent: int,
        period_s: int,
    ) -> burst.Operation:
        if not burst.cfs_quota_burst_enabled(policy):
            return burst.Operation.RESET
        labels = {kinds.POD_UID: pod.uid, kinds.CONTAINER_ID: container.id or ""}
        if period_s >= 0 and ceil_percent > 100:
            usage = self.latest(kinds.CONTAINER_CPU_USAGE, labels)
            limit_cores = container.limits.cpu / 1000
            percent = 100.0 if usage is None else usage / limit_cores * 100
            limiter = self._limiters.get(container.id or "")
            if limiter is None or limiter.capacity != period_s * (ceil_percent - 100):
                limiter = burst.BurstLimiter(period_s, ceil_percent, self.handle.clock)
                self._limiters[container.id or ""] = limiter
            if not limiter.allow(percent):
                return burst.Operation.SCALE_DOWN
        throttled = self.latest(kinds.CONTAINER_CPU_THROTTLED_RATIO, labels)
        if throttled is None or throttled <= 0:
            return burst.Operation.REMAIN
        return burst.Operation.SCALE_UP


def _quota(fs: cgroups.CgroupFS, rel_dir: cgroups.RelDir) -> int | None:
    """The cgroup's cfs quota, None when unlimited."""
    return cgroups.read_cpu_max(fs, rel_dir).quota_us
