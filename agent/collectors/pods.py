"""Pod and container usage: CPU, memory and CFS throttling from each cgroup.

Per pod and per container, every round: CPU cores from the cgroup's usage
counter delta over wall time (v1 `cpuacct.usage`, v2 `cpu.stat usage_usec`),
memory as inactive_anon + active_anon + unevictable of `memory.stat` (the
working set without page cache, docs/design.md "Usage semantics"), and the throttled ratio
Δnr_throttled / Δnr_periods of `cpu.stat` (0 when no period elapsed). With the
PSICollector gate on, each pod's PSI avg10 is stored too.

This is the agent's hot path (750 cgroups a second on a 250-pod node), so it
parses with `hostio`, reads through a `FileReader` that keeps the files open,
with paths resolved once per pod, and keeps the previous counters in one dict
per round. A pod whose files cannot be read costs only
that pod's samples: the failure is counted with its reason and the round goes
on; a vanished pod is dropped from the source at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import cgroups
from agent import discovery
from agent import kinds as agent_kinds
from agent.collectors import hostio
from agent.collectors.base import ErrorSink, Reason, Round, rate, reason_of
from agent.collectors.filereader import FileReader
from metriccache import MetricKind, Sample, kinds

V1 = cgroups.CgroupVersion.V1

# (monotonic time, usage_ns, nr_periods, nr_throttled) of one cgroup's last reading
_Reading = tuple[float, int, int | None, int | None]
_PSI_FILES = (
    ("cpu", cgroups.PressureKind.CPU),
    ("memory", cgroups.PressureKind.MEMORY),
    ("io", cgroups.PressureKind.IO),
)


def _cpu_reader(
    version: cgroups.CgroupVersion, reader: FileReader
) -> Callable[[discovery.CgroupFiles], hostio.CpuCounters]:
    read = reader.read
    if version is V1:

        def read_v1(files: discovery.CgroupFiles) -> hostio.CpuCounters:
            usage, stat = read(files.cpu_usage), read(files.cpu_stat)
            return hostio.parse_cpu_stat_v1(usage, stat, files.cpu_usage, files.cpu_stat)

        return read_v1

    def read_v2(files: discovery.CgroupFiles) -> hostio.CpuCounters:
        return hostio.parse_cpu_stat_v2(read(files.cpu_stat), files.cpu_stat)

    return read_v2


def _rates(
    prev: _Reading | None, now: float, cpu: hostio.CpuCounters
) -> tuple[float | None, float | None]:
    """(cores, throttled ratio) since `prev`; both None on a first reading or a reset."""
    if prev is None:
        return None, None
    ns_per_second = rate(prev[1], prev[0], cpu.usage_ns, now)
    if ns_per_second is None:
        return None, None  # the cgroup was recreated: no rate across the reset
    cores = ns_per_second / 1e9
    if cpu.nr_periods is None or cpu.nr_throttled is None or prev[2] is None or prev[3] is None:
        return cores, None
    periods, throttled = cpu.nr_periods - prev[2], cpu.nr_throttled - prev[3]
    if periods < 0 or throttled < 0:
        return cores, None
    return cores, (throttled / periods if periods else 0.0)


_POD_KINDS = (kinds.POD_CPU_USAGE, kinds.POD_MEMORY_USAGE, kinds.POD_CPU_THROTTLED_RATIO)
_CONTAINER_KINDS = (
    kinds.CONTAINER_CPU_USAGE,
    kinds.CONTAINER_MEMORY_USAGE,
    kinds.CONTAINER_CPU_THROTTLED_RATIO,
)


class PodCollector:
    """Pod and container CPU, memory and throttling; see the module docstring."""

    __slots__ = (
        "_errors",
        "_fs",
        "_prev",
        "_psi",
        "_read_cpu",
        "_reader",
        "_source",
        "_version",
    )

    name = "pods"

    def __init__(
        self,
        fs: cgroups.CgroupFS,
        source: discovery.PodSource,
        errors: ErrorSink,
        reader: FileReader,
        *,
        psi: bool = False,
    ) -> None:
        self._fs = fs
        self._reader = reader
        self._version = fs.version
        self._source = source
        self._errors = errors
        self._psi = psi
        self._read_cpu = _cpu_reader(fs.version, reader)
        # last reading by pod UID or container ID (the two never collide: a UID
        # has dashes, a container ID is hex)
        self._prev: dict[str, _Reading] = {}

    def collect(self, rnd: Round) -> None:
        """Read every pod and container of the source once."""
        seen: dict[str, _Reading] = {}
        for pod in self._source.targets():
            try:
                cores, memory = self._cgroup(pod.files, pod.uid, pod.labels, _POD_KINDS, rnd, seen)
            except cgroups.CgroupError as err:
                self._lost(err, pod.uid)
                rnd.pods_cpu_complete = False
                continue
            rnd.pods_memory_bytes += memory
            if cores is None:
                rnd.pods_cpu_complete = False
            else:
                rnd.pods_cpu_cores += cores
            for c in pod.containers:
                try:
                    self._cgroup(c.files, c.id, c.labels, _CONTAINER_KINDS, rnd, seen)
                except cgroups.CgroupError as err:
                    self._lost(err, None)
            if self._psi:
                self._pod_psi(pod, rnd)
        self._prev = seen
        self._reader.end_round()

    def _cgroup(
        self,
        files: discovery.CgroupFiles,
        key: str,
        labels: Mapping[str, str],
        kinds_: tuple[MetricKind, MetricKind, MetricKind],
        rnd: Round,
        seen: dict[str, _Reading],
    ) -> tuple[float | None, int]:
        """Read one cgroup and append its samples; (cores or None, memory bytes)."""
        cpu = self._read_cpu(files)
        memory = hostio.parse_working_set(
            self._reader.read(files.memory_stat), self._version, files.memory_stat
        )
        now, ts = rnd.monotonic, rnd.time
        seen[key] = (now, cpu.usage_ns, cpu.nr_periods, cpu.nr_throttled)
        cores, ratio = _rates(self._prev.get(key), now, cpu)
        cpu_kind, memory_kind, ratio_kind = kinds_
        out = rnd.samples
        out.append(Sample(memory_kind, labels, ts, memory))
        if cores is not None:
            out.append(Sample(cpu_kind, labels, ts, cores))
        if ratio is not None:
            out.append(Sample(ratio_kind, labels, ts, ratio))
        return cores, memory

    def _pod_psi(self, pod: discovery.PodTarget, rnd: Round) -> None:
        for resource, kind in _PSI_FILES:
            try:
                pressure = cgroups.read_pressure(self._fs, pod.files.rel_dir, kind)
            except cgroups.CgroupError as err:
                self._errors(self.name, reason_of(err))
                return
            if pressure is None:
                continue  # this kernel has no PSI for cgroups
            for stall, line in (("some", pressure.some), ("full", pressure.full)):
                if line is not None:
                    labels = {kinds.POD_UID: pod.uid, "resource": resource, "kind": stall}
                    rnd.samples.append(Sample(agent_kinds.POD_PSI, labels, rnd.time, line.avg10))

    def _lost(self, err: cgroups.CgroupError, pod_uid: cgroups.PodUID | None) -> None:
        """Count a lost pod (`pod_uid`) or container (None); let the source know it went."""
        reason = reason_of(err)
        self._errors(self.name, reason)
        if reason is Reason.GONE:
            if pod_uid is not None:
                self._source.forget(pod_uid)
            else:
                self._source.rescan_soon()  # a container restarted: find its new cgroup
