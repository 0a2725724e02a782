"""System usage: what the node uses beyond pods and host applications.

``system = node - Σ pods - Σ host applications``, floored at 0
(docs/design.md, "Usage semantics"), from the values the node, pod and
host-application collectors noted in this
same round. Host applications are processes outside kubepods that the
operator names by cgroup (NodeSLO `hostApplications` in cluster mode); they
are read here, before the subtraction.

A round in which some pod's or host application's CPU rate is unknown (a new,
restarted or vanished pod, a failed read) gets no system CPU sample: its CPU
would otherwise be charged to the system for that second. Memory is a level,
not a rate, so it is always computed when node memory is known.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

import cgroups
from agent.collectors.base import CounterRates, ErrorSink, Round, reason_of
from metriccache import Sample, kinds

_NO_LABELS: dict[str, str] = {}


@dataclass(frozen=True, slots=True)
class HostApp:
    """A host application: a name for the `app` label and its cgroup directory."""

    name: str
    cgroup_dir: PurePosixPath


class HostAppCollector:
    """CPU and memory of each host application cgroup."""

    __slots__ = ("_apps", "_errors", "_fs", "_labels", "_rates")

    name = "hostapps"

    def __init__(self, fs: cgroups.CgroupFS, apps: Sequence[HostApp], errors: ErrorSink) -> None:
        self._fs = fs
        self._apps = tuple(apps)
        self._labels = {app.name: {"app": app.name} for app in self._apps}
        self._errors = errors
        self._rates = CounterRates()

    def collect(self, rnd: Round) -> None:
        """Append each application's CPU (from its second reading) and memory."""
        for app in self._apps:
            try:
                usage = cgroups.read_cpu_usage(self._fs, app.cgroup_dir).usage_ns
                memory = cgroups.read_memory_stat(self._fs, app.cgroup_dir)
            except cgroups.CgroupError as err:
                self._errors(self.name, reason_of(err))
                rnd.host_apps_complete = False
                continue
            labels = self._labels[app.name]
            working_set = memory.working_set_without_cache
            rnd.host_apps_memory_bytes += working_set
            rnd.samples.append(Sample(kinds.HOST_APP_MEMORY_USAGE, labels, rnd.time, working_set))
            per_second = self._rates.update(app.name, usage, rnd.monotonic)
            if per_second is None:
                rnd.host_apps_complete = False
                continue
            rnd.host_apps_cpu_cores += per_second / 1e9
            rnd.samples.append(Sample(kinds.HOST_APP_CPU_USAGE, labels, rnd.time, per_second / 1e9))
        self._rates.end_round()


def system_usage(rnd: Round) -> tuple[float | None, int | None]:
    """(cores, bytes) the system used this round, None where it cannot be known."""
    cpu = None
    if rnd.node_cpu_cores is not None and rnd.pods_cpu_complete and rnd.host_apps_complete:
        cpu = max(0.0, rnd.node_cpu_cores - rnd.pods_cpu_cores - rnd.host_apps_cpu_cores)
    memory = None
    if rnd.node_memory_bytes is not None:
        memory = max(0, rnd.node_memory_bytes - rnd.pods_memory_bytes - rnd.host_apps_memory_bytes)
    return cpu, memory


class SystemCollector:
    """Appends system CPU and memory computed from the round so far (runs last)."""

    __slots__ = ()

    name = "system"

    def collect(self, rnd: Round) -> None:
        """Append system usage where it is known."""
        cpu, memory = system_usage(rnd)
        if cpu is not None:
            rnd.samples.append(Sample(kinds.SYSTEM_CPU_USAGE, _NO_LABELS, rnd.time, cpu))
        if memory is not None:
            rnd.samples.append(Sample(kinds.SYSTEM_MEMORY_USAGE, _NO_LABELS, rnd.time, memory))
