"""CPUSuppress: cap best-effort pods' CPU to what latency-sensitive pods leave over.

Every tick (gate `BECPUSuppress`, and NodeSLO `resourceUsedThresholdWithBE.enable`)
the BE budget of `budget.be_budget` is applied to the kubepods best-effort
cgroup, by `cpuSuppressPolicy`:

- cfsQuota: the BE cgroup's cfs quota (`cpu.cfs_quota_us` / `cpu.max`);
- cpuset: the BE cgroup, its pods and their containers get ceil(budget) CPUs
  (a leveled write: parents are widened to the union first).

The policy not in use is recovered once (quota unlimited, cpuset all usable
CPUs), and both are recovered when the NodeSLO disables the feature, as
koordlet does.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence

import cgroups
from kube import classify, objects
from metriccache import kinds
from qosmanager import executor as qexecutor
from qosmanager import features
from qosmanager import states as qstates
from qosmanager.plugins import base
from qosmanager.plugins.cpusuppress import budget

log = logging.getLogger(__name__)

NAME = features.BE_CPU_SUPPRESS
CFS_QUOTA = "cfsQuota"
CPUSET = "cpuset"
DEFAULT_THRESHOLD_PERCENT = 65


def is_be(pod: qstates.PodMeta) -> bool:
    """Koordinator's BE filter: BE by label or by Kubernetes QoS."""
    return pod.qos is classify.KoordQOS.BE or pod.kube_qos is classify.KubeQOS.BEST_EFFORT


class CPUSuppress(base.PeriodicStrategy):
    """The BECPUSuppress strategy."""

    name = NAME
    interval_flag = "--cpu-suppress-interval-seconds"

    def __init__(self, handle: base.Handle | None = None, *, interval: float = 1.0) -> None:
        super().__init__(handle, interval=interval)
        self._recovered: set[str] = set()  # policies known to be undone

    @property
    def be_dir(self) -> cgroups.RelDir:
        """The kubepods best-effort cgroup."""
        return self.handle.fs.kubepods_dir(cgroups.QoSLevel.BESTEFFORT)

    def tick(self) -> None:
        thresholds = self.states.node_slo().thresholds
        if not thresholds.enable:
            self._recover(CFS_QUOTA)
            self._recover(CPUSET)
            return
        node = self.states.node()
        if node is None:
            log.debug("%s: no node yet", NAME)
            return
        pods = self.states.pods()
        threshold = thresholds.cpu_suppress_threshold_percent
        available = self.budget(
            node,
            pods,
            DEFAULT_THRESHOLD_PERCENT if threshold is None else threshold,
            thresholds.cpu_suppress_min_percent,
        )
        if available is None:
            return
        if thresholds.cpu_suppress_policy == CFS_QUOTA:
            self._apply_quota(available, node.capacity.cpu)
            self._recover(CPUSET)
        else:
            self._apply_cpuset(available, pods)
            self._recover(CFS_QUOTA)

    def budget(
        self,
        node: objects.Node,
        pods: Sequence[qstates.PodMeta],
        threshold_percent: int,
        min_percent: int | None = None,
    ) -> int | None:
        """The BE budget in millicores from the latest samples; None without samples."""
        node_used = self.latest(kinds.NODE_CPU_USAGE, {})
        if node_used is None:
            log.info("%s: no recent node CPU sample; skipped", NAME)
            return None
        by_uid = {p.uid: p for p in pods}
        non_be = all_pods = 0
        for uid, cores in self.latest_by_pod(kinds.POD_CPU_USAGE).items():
            millis = round(cores * 1000)
            all_pods += millis
            meta = by_uid.get(uid)
            if meta is None or not is_be(meta):  # unknown pods count as non-BE (koordlet)
                non_be += millis
        return budget.be_budget(
            capacity_millis=node.capacity.cpu,
            threshold_percent=threshold_percent,
            non_be_pods_millis=non_be,
            system_millis=budget.system_usage(round(node_used * 1000), all_pods),
            reserved_millis=base.node_reserved(node).cpu,
            min_percent=min_percent,
        )

    def _apply_quota(self, available: int, capacity_millis: int) -> None:
        current = cgroups.read_cpu_max(self.handle.fs, self.be_dir)
        quota = budget.cfs_quota(
            available,
            current.quota_us,
            capacity_millis=capacity_millis,
            period_us=current.period_us,
        )
        self._recovered.discard(CFS_QUOTA)
        if quota is None:
            log.debug("%s: change below the minimum delta; quota kept", NAME)
            quota = current.quota_us
        else:
            self.handle.executor.update(NAME, self.be_dir, cgroups.Resource.CPU_QUOTA, quota)
        if quota is not None:
            gauge = self.handle.metrics.be_suppress_cpu_cores
            gauge.labels(CFS_QUOTA).set(quota / current.period_us)

    def _apply_cpuset(self, available: int, pods: Sequence[qstates.PodMeta]) -> None:
        usable, lsr = self._node_cpus(pods)
        current = cgroups.read_cpuset_cpus(self.handle.fs, self.be_dir)
        size = budget.cpuset_size(available, len(current), len(usable))
        cpus = budget.choose_cpus(usable, size, avoid=lsr)
        if not cpus:
            log.warning("%s: no CPU left for BE pods; cpuset unchanged", NAME)
            return
        self._recovered.discard(CPUSET)
        levels = self._cpuset_levels(cpus)
        self.handle.executor.update_leveled(NAME, cgroups.Resource.CPUSET_CPUS, levels)
        self.handle.metrics.be_suppress_cpu_cores.labels(CPUSET).set(len(cpus))

    def _node_cpus(self, pods: Sequence[qstates.PodMeta]) -> tuple[frozenset[int], frozenset[int]]:
        """(CPUs BE pods may use at all: all but LSE-pinned ones, CPUs pinned to LSR pods)."""
        root = self.handle.fs.kubepods_root()
        every = cgroups.read_cpuset_cpus(self.handle.fs, root, effective=True)
        lse: set[int] = set()
        lsr: set[int] = set()
        for pod in pods:
            if pod.qos is classify.KoordQOS.LSE:
                lse |= pod.pinned_cpus()
            elif pod.qos is classify.KoordQOS.LSR:
                lsr |= pod.pinned_cpus()
        return every - lse, frozenset(lsr)

    def _cpuset_levels(self, cpus: frozenset[int]) -> list[qexecutor.Level]:
        """The BE cgroup, its pods, their containers: top-down levels."""
        be_pods = [
            p for p in cgroups.scan_pods(self.handle.fs) if p.qos is cgroups.QoSLevel.BESTEFFORT
        ]
        levels: list[qexecutor.Level] = [
            [(self.be_dir, cpus)],
            [(p.rel_dir, cpus) for p in be_pods],
            [(c.rel_dir, cpus) for p in be_pods for c in p.containers],
        ]
        return [level for level in levels if level]

    def _recover(self, policy: str) -> None:
        """Undo `policy` once: quota unlimited, or the cpuset back to every usable CPU."""
        if policy in self._recovered:
            return
        try:
            if policy == CFS_QUOTA:
                self.handle.executor.update(NAME, self.be_dir, cgroups.Resource.CPU_QUOTA, None)
            else:
                usable, _ = self._node_cpus(self.states.pods())
                levels = self._cpuset_levels(usable)
                self.handle.executor.update_leveled(NAME, cgroups.Resource.CPUSET_CPUS, levels)
        except (cgroups.Unsupported, cgroups.CgroupGone) as err:
            log.debug("%s: nothing to recover for %s: %s", NAME, policy, err)
        self._recovered.add(policy)
        with contextlib.suppress(KeyError):  # KeyError: never set
            self.handle.metrics.be_suppress_cpu_cores.remove(policy)
