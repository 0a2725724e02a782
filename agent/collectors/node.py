"""Node-level collectors: CPU and memory from /proc or the kubepods cgroup, PSI.

Semantics are docs/design.md's ("Usage semantics"): node CPU is the busy ticks
of the aggregate /proc/stat line (user+nice+system+irq+softirq) over wall time,
in cores; node memory is MemTotal - MemAvailable. With
`--node-usage-source=kubepods` the node is what
the kubelet's pod cgroup (`<kubelet cgroup root>/kubepods`) uses instead: its
CPU usage counter over wall time and its working set without page cache, the
same measures as a pod's, so only the node's pods count (several kubelets on
one machine each see their own pods; see `PodsNodeCollector`). PSI comes from
/proc/pressure/{cpu,memory,io} (the whole machine; cgroup v1 hosts have it too
when the kernel has CONFIG_PSI); a kernel without PSI is not an error, the
collector just has nothing to say.
"""

from __future__ import annotations

import logging
from pathlib import Path

import cgroups
from agent.collectors import hostio
from agent.collectors.base import CounterRates, ErrorSink, Round, reason_of
from metriccache import Sample, kinds

log = logging.getLogger(__name__)

_NO_LABELS: dict[str, str] = {}


class NodeCollector:
    """Node CPU (a rate of /proc/stat busy ticks) and memory (/proc/meminfo)."""

    __slots__ = ("_errors", "_procfs", "_rates")

    name = "node"

    def __init__(self, procfs: cgroups.ProcFS, errors: ErrorSink) -> None:
        self._procfs = procfs
        self._errors = errors
        self._rates = CounterRates()

    def collect(self, rnd: Round) -> None:
        """Append node CPU (from the second round on) and node memory."""
        try:
            busy = self._procfs.read_cpu_times().busy
        except cgroups.CgroupError as err:
            self._errors(self.name, reason_of(err))
        else:
            ticks_per_second = self._rates.update("busy", busy, rnd.monotonic)
            if ticks_per_second is not None:
                cores = ticks_per_second / self._procfs.clock_ticks
                rnd.node_cpu_cores = cores
                rnd.samples.append(Sample(kinds.NODE_CPU_USAGE, _NO_LABELS, rnd.time, cores))
        self._rates.end_round()
        try:
            used = self._procfs.read_meminfo().used_bytes
        except cgroups.CgroupError as err:
            self._errors(self.name, reason_of(err))
        else:
            rnd.node_memory_bytes = used
            rnd.samples.append(Sample(kinds.NODE_MEMORY_USAGE, _NO_LABELS, rnd.time, used))


class PodsNodeCollector:
    """Node CPU and memory as the kubelet's kubepods cgroup subtree uses them.

    The kubepods cgroup holds every pod of the node, whatever its QoS class:
    v1 `cpuacct.usage` and v2 `cpu.stat` usage_usec count the whole subtree,
    v1 `memory.stat` total_* and v2 `memory.stat` are hierarchical too
    (kernel Documentation/admin-guide/cgroup-v1/memory.rst 5.2, cgroup-v2.rst).
    """

    __slots__ = ("_dir", "_errors", "_fs", "_rates")

    name = "node"

    def __init__(self, fs: cgroups.CgroupFS, errors: ErrorSink) -> None:
        self._fs = fs
        self._dir = fs.kubepods_root()
        self._errors = errors
        self._rates = CounterRates()

    def collect(self, rnd: Round) -> None:
        """Append node CPU (from the second round on) and node memory of kubepods."""
        try:
            usage_ns = cgroups.read_cpu_usage(self._fs, self._dir).usage_ns
        except cgroups.CgroupError as err:
            self._errors(self.name, reason_of(err))
        else:
            ns_per_second = self._rates.update("kubepods", usage_ns, rnd.monotonic)
            if ns_per_second is not None:
                cores = ns_per_second / 1e9
                rnd.node_cpu_cores = cores
                rnd.samples.append(Sample(kinds.NODE_CPU_USAGE, _NO_LABELS, rnd.time, cores))
        self._rates.end_round()
        try:
            used = cgroups.read_memory_stat(self._fs, self._dir).working_set_without_cache
        except cgroups.CgroupError as err:
            self._errors(self.name, reason_of(err))
        else:
            rnd.node_memory_bytes = used
            rnd.samples.append(Sample(kinds.NODE_MEMORY_USAGE, _NO_LABELS, rnd.time, used))


_PSI_RESOURCES = ("cpu", "memory", "io")


class NodePSICollector:
    """Node pressure stall information (avg10, percent) for some and full stalls."""

    __slots__ = ("_errors", "_labels", "_paths", "_unsupported_logged")

    name = "psi"

    def __init__(self, proc_root: Path, errors: ErrorSink) -> None:
        self._errors = errors
        self._paths = {res: str(proc_root / "pressure" / res) for res in _PSI_RESOURCES}
        self._labels = {
            (res, kind): {"resource": res, "kind": kind}
            for res in _PSI_RESOURCES
            for kind in ("some", "full")
        }
        self._unsupported_logged = False

    def collect(self, rnd: Round) -> None:
        """Append avg10 of each PSI line the kernel provides."""
        for resource, path in self._paths.items():
            try:
                text = hostio.read_bytes(path).decode()
                pressure = cgroups.parse_pressure(text, source=path)
            except cgroups.CgroupGone:
                if not self._unsupported_logged:
                    log.info("no pressure stall information at %s; node PSI not collected", path)
                    self._unsupported_logged = True
                continue
            except cgroups.CgroupError as err:
                self._errors(self.name, reason_of(err))
                continue
            lines = (("some", pressure.some), ("full", pressure.full))
            for kind, line in lines:
                if line is not None:
                    labels = self._labels[(resource, kind)]
                    rnd.samples.append(Sample(kinds.NODE_PSI, labels, rnd.time, line.avg10))
