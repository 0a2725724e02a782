"""The best-effort QoS group as a whole: its CPU usage, CFS quota and cpuset.

Read once per round from the kubelet's best-effort QoS cgroup
(`kubepods/besteffort`, `kubepods.slice/kubepods-besteffort.slice`), which holds
every BE pod, so its counter is the sum of their usage without summing pods.
What CPU suppression (`BECPUSuppress`) granted is stored two ways: the cpuset
size in `be_cpuset_cpus`, and the effective grant in `be_cpu_quota` - the CFS
quota in cores, capped by the cpuset size (a quota above the cpuset cannot be
used). A missing group or file (no kubelet on this machine, no cpuset
controller delegated on v2) is not an error: there is nothing to report.
"""

from __future__ import annotations

import logging

import cgroups
from agent import kinds as agent_kinds
from agent.collectors.base import CounterRates, ErrorSink, Round, reason_of
from metriccache import Sample, kinds

log = logging.getLogger(__name__)

_NO_LABELS: dict[str, str] = {}


class BestEffortCollector:
    """BE group usage (a counter rate), quota and cpuset size."""

    __slots__ = ("_absent_logged", "_errors", "_fs", "_rates", "_rel")

    name = "besteffort"

    def __init__(self, fs: cgroups.CgroupFS, errors: ErrorSink) -> None:
        self._fs = fs
        self._rel = fs.kubepods_dir(cgroups.QoSLevel.BESTEFFORT)
        self._errors = errors
        self._rates = CounterRates()
        self._absent_logged = False

    def collect(self, rnd: Round) -> None:
        """Append BE usage (from the second round on), quota and cpuset size."""
        fs, rel, ts, out = self._fs, self._rel, rnd.time, rnd.samples
        try:
            usage = cgroups.read_cpu_usage(fs, rel).usage_ns
        except cgroups.CgroupError as err:
            self._failed(err)
        else:
            per_second = self._rates.update("usage", usage, rnd.monotonic)
            if per_second is not None:
                out.append(Sample(kinds.BE_CPU_USAGE, _NO_LABELS, ts, per_second / 1e9))
        self._rates.end_round()
        cpus: int | None = None
        try:
            cpus = len(cgroups.read_cpuset_cpus(fs, rel, effective=True))
        except cgroups.CgroupError as err:
            self._failed(err)
        else:
            out.append(Sample(agent_kinds.BE_CPUSET_CPUS, _NO_LABELS, ts, cpus))
        try:
            cpu_max = cgroups.read_cpu_max(fs, rel)
        except cgroups.CgroupError as err:
            self._failed(err)
            return
        granted = _granted_cores(cpu_max, cpus)
        if granted is not None:
            out.append(Sample(kinds.BE_CPU_QUOTA, _NO_LABELS, ts, granted))

    def _failed(self, err: cgroups.CgroupError) -> None:
        if isinstance(err, cgroups.CgroupGone):
            if not self._absent_logged:
                log.info("best-effort QoS group incomplete (%s); skipping what is missing", err)
                self._absent_logged = True
            return
        self._errors(self.name, reason_of(err))


def _granted_cores(cpu_max: cgroups.CpuMax, cpuset_cpus: int | None) -> float | None:
    """CPU the BE group may use: quota/period, capped by the cpuset; None if unbounded."""
    quota = None if cpu_max.quota_us is None else cpu_max.quota_us / cpu_max.period_us
    if quota is None:
        return None if cpuset_cpus is None else float(cpuset_cpus)
    return quota if cpuset_cpus is None else min(quota, float(cpuset_cpus))
