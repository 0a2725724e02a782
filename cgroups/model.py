"""The vocabulary of the cgroups package: enums, identifiers and the typed values
its parsers and readers return.

Everything here is plain data (frozen slotted dataclasses, enums, NewTypes) so the
agent's collectors and the qosmanager can hold and compare the values freely.
`cgroups` may not import `kube`, so the pod identifiers are declared locally.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import NewType

PodUID = NewType("PodUID", str)
ContainerID = NewType("ContainerID", str)


class CgroupVersion(enum.Enum):
    """Which cgroup hierarchy the host mounts; hybrid hosts count as V1."""

    V1 = "v1"
    V2 = "v2"


class Driver(enum.Enum):
    """The kubelet cgroup driver, which decides how pod directories are named."""

    SYSTEMD = "systemd"
    CGROUPFS = "cgroupfs"


class QoSLevel(enum.Enum):
    """The kubelet's QoS level of a pod cgroup (Guaranteed pods have no QoS dir)."""

    _value_: str
    GUARANTEED = "guaranteed"
    BURSTABLE = "burstable"
    BESTEFFORT = "besteffort"

    @classmethod
    def from_qos_class(cls, qos_class: str) -> QoSLevel:
        """Map a pod's `status.qosClass` ("Guaranteed", "Burstable", "BestEffort")."""
        try:
            return cls(qos_class.lower())
        except ValueError as err:
            raise ValueError(f"unknown pod QoS class {qos_class!r}") from err


class Runtime(enum.Enum):
    """A container runtime, valued by the scheme kubelet puts in `containerID`."""

    _value_: str
    CONTAINERD = "containerd"
    CRIO = "cri-o"
    DOCKER = "docker"

    @property
    def scope_prefix(self) -> str:
        """Prefix of the runtime's systemd scope: `<prefix>-<id>.scope`."""
        return _SCOPE_PREFIX[self]


_SCOPE_PREFIX = {
    Runtime.CONTAINERD: "cri-containerd",
    Runtime.CRIO: "crio",
    Runtime.DOCKER: "docker",
}


@dataclass(frozen=True, slots=True)
class ContainerRef:
    """A container as kubelet reports it: `<runtime>://<id>` in a pod's status."""

    runtime: Runtime
    id: ContainerID

    def __str__(self) -> str:
        return f"{self.runtime.value}://{self.id}"


@dataclass(frozen=True, slots=True)
class ContainerCgroup:
    """A container directory found by `scan_pods`.

    `runtime` is None under the cgroupfs driver for containerd and docker, whose
    directory is the bare id and so does not say which runtime made it.
    """

    id: ContainerID
    runtime: Runtime | None
    rel_dir: PurePosixPath


@dataclass(frozen=True, slots=True)
class PodCgroup:
    """A pod directory found by `scan_pods`, with the containers below it."""

    qos: QoSLevel
    uid: PodUID
    rel_dir: PurePosixPath
    containers: tuple[ContainerCgroup, ...]


@dataclass(frozen=True, slots=True)
class CpuUsage:
    """Cumulative CPU time consumed by a cgroup, in nanoseconds.

    v1 `cpuacct.usage` is already in ns; v2 `cpu.stat usage_usec` is scaled up, so
    the last three digits are always zero on v2.
    """

    usage_ns: int


@dataclass(frozen=True, slots=True)
class CpuThrottling:
    """CFS bandwidth counters from `cpu.stat`; `throttled_ns` is cumulative."""

    nr_periods: int
    nr_throttled: int
    throttled_ns: int

    @property
    def throttled_ratio(self) -> float:
        """Share of enforcement periods in which the cgroup was throttled."""
        return self.nr_throttled / self.nr_periods if self.nr_periods else 0.0


@dataclass(frozen=True, slots=True)
class CpuMax:
    """CFS bandwidth limit in microseconds; `quota_us` None means unlimited."""

    quota_us: int | None
    period_us: int


@dataclass(frozen=True, slots=True)
class MemoryStat:
    """The `memory.stat` counters nodeqos uses, all in bytes, hierarchical.

    v1 values come from the `total_*` keys (the cgroup and its descendants), v2
    values are hierarchical already. `cache` is v1 `total_cache` / v2 `file`, `rss`
    is v1 `total_rss` / v2 `anon`.
    """

    inactive_anon: int
    active_anon: int
    unevictable: int
    inactive_file: int
    active_file: int
    cache: int
    rss: int

    @property
    def working_set_without_cache(self) -> int:
        """Memory page-cache reclaim cannot free: pod usage (docs/design.md, "Usage semantics")."""
        return self.inactive_anon + self.active_anon + self.unevictable


class PressureKind(enum.Enum):
    """The three pressure stall information files, valued by file name."""

    CPU = "cpu.pressure"
    MEMORY = "memory.pressure"
    IO = "io.pressure"


@dataclass(frozen=True, slots=True)
class PressureLine:
    """One PSI line: running averages in percent and the stall total in µs."""

    avg10: float
    avg60: float
    avg300: float
    total_us: int


@dataclass(frozen=True, slots=True)
class Pressure:
    """A PSI file; `full` is None where the kernel does not report it (cpu before 5.13)."""

    some: PressureLine
    full: PressureLine | None
