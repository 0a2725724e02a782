"""Fake cgroup and /proc trees for tests, written into a temporary directory.

Reusable by every test that reads the host (the cgroups package, the agent's
collectors). A tree is described with plain values, not file contents:

    tree = write_pod_tree(tmp_path, CgroupVersion.V2, Driver.SYSTEMD, pods=[
        fake_pod("11111111-2222-3333-4444-555555555555", qos=QoSLevel.BURSTABLE,
                 cpu_usage_ns=5_000_000, active_anon=64 << 20,
                 containers=[fake_container("abc123", cpu_usage_ns=4_000_000)]),
    ])
    tree.advance_cpu(tree.pod_dir(pod), 1_000_000)   # the counter moves on
    tree.remove(tree.pod_dir(pod))                   # the pod goes away

Paths are spelled out independently of `cgroups.layout`, so a layout bug fails tests.
"""

from __future__ import annotations

import dataclasses
import enum
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from cgroups import CgroupFS, CgroupVersion, Driver, QoSLevel, Runtime

V1_UNLIMITED = 9223372036854771712  # what 4 KiB-page kernels print for "no limit"


@dataclass(frozen=True, kw_only=True)
class CgroupValues:
    """What one cgroup directory reports; units as the names say, memory in bytes."""

    cpu_usage_ns: int = 0
    nr_periods: int = 0
    nr_throttled: int = 0
    throttled_ns: int = 0
    cpu_quota_us: int | None = None
    cpu_period_us: int = 100_000
    cpu_burst_us: int = 0
    cpu_shares: int = 1024
    cpu_idle: int | None = 0  # None: no cpu.idle file (a kernel before 5.15)
    cpuset_cpus: str = "0-3"
    inactive_anon: int = 0
    active_anon: int = 0
    unevictable: int = 0
    inactive_file: int = 0
    active_file: int = 0
    memory_usage_bytes: int | None = None  # None: the sum of the memory.stat counters
    memory_limit_bytes: int | None = None  # None: unlimited
    # PSI file name -> raw content; files not named here are not written
    pressure: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class FakeContainer:
    id: str
    runtime: Runtime = Runtime.CONTAINERD
    values: CgroupValues = CgroupValues()


@dataclass(frozen=True, kw_only=True)
class FakePod:
    uid: str
    qos: QoSLevel = QoSLevel.BURSTABLE
    containers: tuple[FakeContainer, ...] = ()
    values: CgroupValues = CgroupValues()


def fake_container(
    cid: str, *, runtime: Runtime = Runtime.CONTAINERD, **values: Any
) -> FakeContainer:
    """A container; keyword overrides are CgroupValues fields."""
    return FakeContainer(id=cid, runtime=runtime, values=CgroupValues(**values))


def fake_pod(
    uid: str,
    *,
    qos: QoSLevel = QoSLevel.BURSTABLE,
    containers: Iterable[FakeContainer] = (),
    **values: Any,
) -> FakePod:
    """A pod; keyword overrides are CgroupValues fields of the pod-level cgroup."""
    return FakePod(uid=uid, qos=qos, containers=tuple(containers), values=CgroupValues(**values))


class V1Mounts(enum.Enum):
    """How a fake v1 host mounts cpu and cpuacct."""

    SEPARATE = "separate"  # cpu/ and cpuacct/ are two mounts (this CI machine)
    COMOUNTED = "comounted"  # cpu,cpuacct/ plus cpu and cpuacct symlinks (most distros)
    COMOUNTED_NO_LINKS = "comounted-no-links"  # cpu,cpuacct/ alone


_V1_FILES = {
    "cpu": (
        "cpu.stat",
        "cpu.cfs_quota_us",
        "cpu.cfs_period_us",
        "cpu.cfs_burst_us",
        "cpu.shares",
        "cpu.idle",
    ),
    "cpuacct": ("cpuacct.usage",),
    "cpuset": ("cpuset.cpus", "cpuset.effective_cpus"),
    "memory": ("memory.stat", "memory.usage_in_bytes", "memory.limit_in_bytes"),
}


def _weight(shares: int) -> int:
    return 1 + ((shares - 2) * 9999) // 262142  # kubelet/runc mapping


def _memory_usage(v: CgroupValues) -> int:
    if v.memory_usage_bytes is not None:
        return v.memory_usage_bytes
    return v.inactive_anon + v.active_anon + v.unevictable + v.inactive_file + v.active_file


def _v1_contents(v: CgroupValues) -> dict[str, str]:
    anon, cache = v.inactive_anon + v.active_anon, v.inactive_file + v.active_file
    local = {
        "cache": cache,
        "rss": anon,
        "inactive_anon": v.inactive_anon,
        "active_anon": v.active_anon,
        "inactive_file": v.inactive_file,
        "active_file": v.active_file,
        "unevictable": v.unevictable,
    }
    stat = {**local, "hierarchical_memory_limit": V1_UNLIMITED}
    stat.update({f"total_{key}": value for key, value in local.items()})
    limit = V1_UNLIMITED if v.memory_limit_bytes is None else v.memory_limit_bytes
    idle = {} if v.cpu_idle is None else {"cpu.idle": f"{v.cpu_idle}\n"}
    return {
        **idle,
        "cpuacct.usage": f"{v.cpu_usage_ns}\n",
        "cpu.stat": (
            f"nr_periods {v.nr_periods}\nnr_throttled {v.nr_throttled}\n"
            f"throttled_time {v.throttled_ns}\nnr_bursts 0\nburst_time 0\n"
        ),
        "cpu.cfs_quota_us": f"{-1 if v.cpu_quota_us is None else v.cpu_quota_us}\n",
        "cpu.cfs_period_us": f"{v.cpu_period_us}\n",
        "cpu.cfs_burst_us": f"{v.cpu_burst_us}\n",
        "cpu.shares": f"{v.cpu_shares}\n",
        "cpuset.cpus": f"{v.cpuset_cpus}\n",
        "cpuset.effective_cpus": f"{v.cpuset_cpus}\n",
        "memory.stat": "".join(f"{key} {value}\n" for key, value in stat.items()),
        "memory.usage_in_bytes": f"{_memory_usage(v)}\n",
        "memory.limit_in_bytes": f"{limit}\n",
    }


def _v2_contents(v: CgroupValues) -> dict[str, str]:
    usage_us = v.cpu_usage_ns // 1000
    stat = {
        "anon": v.inactive_anon + v.active_anon,
        "file": v.inactive_file + v.active_file,
        "kernel_stack": 16384,
        "shmem": 0,
        "inactive_anon": v.inactive_anon,
        "active_anon": v.active_anon,
        "inactive_file": v.inactive_file,
        "active_file": v.active_file,
        "unevictable": v.unevictable,
        "pgfault": 42,
    }
    quota = "max" if v.cpu_quota_us is None else str(v.cpu_quota_us)
    idle = {} if v.cpu_idle is None else {"cpu.idle": f"{v.cpu_idle}\n"}
    return {
        **idle,
        "cgroup.controllers": "cpuset cpu io memory pids\n",
        "cpu.stat": (
            f"usage_usec {usage_us}\nuser_usec {usage_us * 2 // 3}\n"
            f"system_usec {usage_us - usage_us * 2 // 3}\nnr_periods {v.nr_periods}\n"
            f"nr_throttled {v.nr_throttled}\nthrottled_usec {v.throttled_ns // 1000}\n"
            "nr_bursts 0\nburst_usec 0\n"
        ),
        "cpu.max": f"{quota} {v.cpu_period_us}\n",
        "cpu.max.burst": f"{v.cpu_burst_us}\n",
        "cpu.weight": f"{_weight(v.cpu_shares)}\n",
        "cpuset.cpus": f"{v.cpuset_cpus}\n",
        "cpuset.cpus.effective": f"{v.cpuset_cpus}\n",
        "memory.stat": "".join(f"{key} {value}\n" for key, value in stat.items()),
        "memory.current": f"{_memory_usage(v)}\n",
        "memory.max": "max\n" if v.memory_limit_bytes is None else f"{v.memory_limit_bytes}\n",
        "memory.min": "0\n",
        "memory.low": "0\n",
        "memory.high": "max\n",
    }


# Files a v2 cgroup keeps when its parent does not enable the controller: the core
# cpu.stat (usage only) and the PSI files (kernel cgroup-v2.rst, "Core Interface Files";
# checked on a real 6.1 kernel by tests/cgroupv2vm/guest_checks.py).
_CORE_FILES = frozenset({"cpu.stat", "cpu.pressure", "memory.pressure", "io.pressure"})
_CORE_CPU_STAT_KEYS = ("usage_usec", "user_usec", "system_usec")


def _without_controllers(contents: dict[str, str], off: frozenset[str]) -> dict[str, str]:
    """What a v2 cgroup shows when its parent's cgroup.subtree_control lacks `off`."""
    kept = {
        name: text
        for name, text in contents.items()
        if name in _CORE_FILES or name.split(".", 1)[0] not in off
    }
    enabled = contents["cgroup.controllers"].split()
    kept["cgroup.controllers"] = " ".join(c for c in enabled if c not in off) + "\n"
    if "cpu" in off:
        lines = kept["cpu.stat"].splitlines(keepends=True)
        kept["cpu.stat"] = "".join(line for line in lines if line.startswith(_CORE_CPU_STAT_KEYS))
    return kept


_SCOPE_PREFIX = {
    Runtime.CONTAINERD: "cri-containerd",
    Runtime.CRIO: "crio",
    Runtime.DOCKER: "docker",
}


class FakeCgroupTree:
    """A fake cgroup root: subsystem mounts (v1) or a unified tree (v2), and pods."""

    def __init__(
        self,
        root: Path,
        version: CgroupVersion,
        driver: Driver,
        *,
        v1_mounts: V1Mounts = V1Mounts.SEPARATE,
        hybrid: bool = False,
    ) -> None:
        self.root, self.version, self.driver, self.v1_mounts = root, version, driver, v1_mounts
        self.values: dict[PurePosixPath, CgroupValues] = {}
        # v2 controllers a cgroup's parent does not enable (`disable_controller`)
        self.disabled: dict[PurePosixPath, frozenset[str]] = {}
        root.mkdir(parents=True, exist_ok=True)
        if version is CgroupVersion.V2:
            (root / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids\n")
        else:
            self._make_v1_mounts()
            if hybrid:  # an empty cgroup2 next to the v1 controllers, as on this machine
                (root / "unified").mkdir()
                (root / "unified" / "cgroup.controllers").write_text("")

    def _make_v1_mounts(self) -> None:
        for subsystem in ("cpuset", "memory"):
            (self.root / subsystem).mkdir()
        if self.v1_mounts is V1Mounts.SEPARATE:
            (self.root / "cpu").mkdir()
            (self.root / "cpuacct").mkdir()
            return
        (self.root / "cpu,cpuacct").mkdir()
        if self.v1_mounts is V1Mounts.COMOUNTED:
            (self.root / "cpu").symlink_to("cpu,cpuacct")
            (self.root / "cpuacct").symlink_to("cpu,cpuacct")

    @property
    def fs(self) -> CgroupFS:
        """A CgroupFS over this tree, with the version and driver it was built with."""
        return CgroupFS(root=self.root, version=self.version, driver=self.driver)

    def _mount(self, subsystem: str) -> Path:
        if self.version is CgroupVersion.V2:
            return self.root
        if subsystem in ("cpu", "cpuacct") and self.v1_mounts is not V1Mounts.SEPARATE:
            return self.root / "cpu,cpuacct"
        return self.root / subsystem

    def physical_dirs(self, rel_dir: PurePosixPath) -> list[Path]:
        """Every real directory of a cgroup (one per v1 mount, one on v2)."""
        subsystems = ("cpu",) if self.version is CgroupVersion.V2 else tuple(_V1_FILES)
        return sorted({self._mount(s) / rel_dir for s in subsystems})

    # -- layout, spelled out independently of cgroups.layout -------------------
    def kubepods_dir(self, qos: QoSLevel) -> PurePosixPath:
        systemd = self.driver is Driver.SYSTEMD
        root = PurePosixPath("kubepods.slice" if systemd else "kubepods")
        if qos is QoSLevel.GUARANTEED:
            return root
        return root / (f"kubepods-{qos.value}.slice" if systemd else qos.value)

    def pod_dir(self, pod: FakePod) -> PurePosixPath:
        if self.driver is Driver.CGROUPFS:
            return self.kubepods_dir(pod.qos) / f"pod{pod.uid}"
        level = "" if pod.qos is QoSLevel.GUARANTEED else f"{pod.qos.value}-"
        return self.kubepods_dir(pod.qos) / f"kubepods-{level}pod{pod.uid.replace('-', '_')}.slice"

    def container_dir(self, pod: FakePod, container: FakeContainer) -> PurePosixPath:
        if self.driver is Driver.SYSTEMD:
            name = f"{_SCOPE_PREFIX[container.runtime]}-{container.id}.scope"
        elif container.runtime is Runtime.CRIO:
            name = f"crio-{container.id}"
        else:
            name = container.id
        return self.pod_dir(pod) / name

    # -- writing --------------------------------------------------------------
    def write_values(self, rel_dir: PurePosixPath, values: CgroupValues) -> None:
        """Create the cgroup (in every v1 mount) and write all its files."""
        self.values[rel_dir] = values
        if self.version is CgroupVersion.V2:
            target = self.root / rel_dir
            target.mkdir(parents=True, exist_ok=True)
            contents = {**_v2_contents(values), **values.pressure}
            off = self.disabled.get(rel_dir, frozenset())
            if off:
                contents = _without_controllers(contents, off)
                for stale in target.iterdir():
                    if stale.is_file() and stale.name not in contents:
                        stale.unlink()
            if "cpu.idle" not in contents:  # a kernel without it, or cpu not enabled here
                (target / "cpu.idle").unlink(missing_ok=True)
            for name, text in contents.items():
                (target / name).write_text(text)
            return
        contents = _v1_contents(values)
        for subsystem, names in _V1_FILES.items():
            target = self._mount(subsystem) / rel_dir
            target.mkdir(parents=True, exist_ok=True)
            for name in names:
                if name in contents:
                    (target / name).write_text(contents[name])
                else:
                    (target / name).unlink(missing_ok=True)
        for name, text in values.pressure.items():  # psi_v1 layout: under cpuacct
            (self._mount("cpuacct") / rel_dir / name).write_text(text)

    def disable_controller(self, rel_dir: PurePosixPath, controller: str) -> None:
        """v2: the parent stops enabling `controller` for `rel_dir`, as systemd leaves a
        slice no unit asked it for: its files go, cgroup.controllers drops it, cpu.stat
        keeps only the usage keys."""
        assert self.version is CgroupVersion.V2, "controllers are per cgroup on v2 only"
        self.disabled[rel_dir] = self.disabled.get(rel_dir, frozenset()) | {controller}
        self.write_values(rel_dir, self.values.get(rel_dir, CgroupValues()))

    def ensure(self, rel_dir: PurePosixPath) -> None:
        """Give `rel_dir` and its parents default values unless they have some."""
        for path in [*reversed(rel_dir.parents[:-1]), rel_dir]:
            if path not in self.values:
                self.write_values(path, CgroupValues())

    def add_pod(self, pod: FakePod) -> PurePosixPath:
        """Write a pod, its QoS parents and its containers; returns the pod dir."""
        pod_rel = self.pod_dir(pod)
        self.ensure(pod_rel.parent)
        self.write_values(pod_rel, pod.values)
        for container in pod.containers:
            self.write_values(self.container_dir(pod, container), container.values)
        return pod_rel

    def update(self, rel_dir: PurePosixPath, **changes: Any) -> CgroupValues:
        """Rewrite a cgroup with some values changed; returns the new values."""
        values = dataclasses.replace(self.values[rel_dir], **changes)
        self.write_values(rel_dir, values)
        return values

    def advance_cpu(
        self, rel_dir: PurePosixPath, delta_ns: int, *, periods: int = 0, throttled: int = 0
    ) -> CgroupValues:
        """Move a cgroup's CPU counters forward, as time passing would."""
        v = self.values[rel_dir]
        return self.update(
            rel_dir,
            cpu_usage_ns=v.cpu_usage_ns + delta_ns,
            nr_periods=v.nr_periods + periods,
            nr_throttled=v.nr_throttled + throttled,
        )

    def remove(self, rel_dir: PurePosixPath) -> None:
        """Delete a cgroup from every mount, as kubelet does when a pod goes."""
        for path in self.physical_dirs(rel_dir):
            shutil.rmtree(path)
        for known in list(self.values):
            if known == rel_dir or rel_dir in known.parents:
                del self.values[known]


def write_pod_tree(
    root: Path,
    version: CgroupVersion,
    driver: Driver,
    pods: Iterable[FakePod] = (),
    *,
    v1_mounts: V1Mounts = V1Mounts.SEPARATE,
    hybrid: bool = False,
) -> FakeCgroupTree:
    """A fake cgroup root with the kubepods hierarchy and the given pods."""
    tree = FakeCgroupTree(root, version, driver, v1_mounts=v1_mounts, hybrid=hybrid)
    tree.ensure(tree.kubepods_dir(QoSLevel.BURSTABLE))
    tree.ensure(tree.kubepods_dir(QoSLevel.BESTEFFORT))
    for pod in pods:
        tree.add_pod(pod)
    return tree


# -- /proc ----------------------------------------------------------------------
def write_proc_stat(
    root: Path,
    *,
    user: int = 0,
    nice: int = 0,
    system: int = 0,
    idle: int = 0,
    iowait: int = 0,
    irq: int = 0,
    softirq: int = 0,
    steal: int = 0,
    btime: int = 1_700_000_000,
) -> None:
    """/proc/stat with the given aggregate ticks (split over two CPUs) and btime."""
    ticks = [user, nice, system, idle, iowait, irq, softirq, steal]
    half = [t // 2 for t in ticks]
    lines = [
        "cpu  " + " ".join(map(str, ticks)) + " 0 0",
        "cpu0 " + " ".join(map(str, half)) + " 0 0",
        "cpu1 " + " ".join(str(t - h) for t, h in zip(ticks, half, strict=True)) + " 0 0",
        "intr 12345 0 0",
        "ctxt 987654",
        f"btime {btime}",
        "processes 4242",
        "procs_running 2",
        "procs_blocked 0",
    ]
    root.mkdir(parents=True, exist_ok=True)
    (root / "stat").write_text("\n".join(lines) + "\n")


def write_meminfo(root: Path, *, total_kb: int, available_kb: int, free_kb: int = 0) -> None:
    """/proc/meminfo with the two fields nodeqos reads among realistic neighbours."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "meminfo").write_text(
        f"MemTotal:       {total_kb} kB\nMemFree:        {free_kb} kB\n"
        f"MemAvailable:   {available_kb} kB\nBuffers:          1024 kB\n"
        "Cached:         204800 kB\nHugePages_Total:       0\n"
    )


def write_pid(
    root: Path,
    pid: int,
    *,
    comm: str = "sleep",
    utime: int = 0,
    stime: int = 0,
    start_ticks: int = 0,
    cgroup: str = "0::/\n",
) -> None:
    """/proc/<pid>/stat and /proc/<pid>/cgroup for one process."""
    fields = ["S", "1", str(pid), str(pid), "0", "-1", "4194304", "100", "0", "0", "0"]
    fields += [str(utime), str(stime), "0", "0", "20", "0", "1", "0", str(start_ticks)]
    fields += ["1000000", "100", "18446744073709551615"]
    (root / str(pid)).mkdir(parents=True, exist_ok=True)
    (root / str(pid) / "stat").write_text(f"{pid} ({comm}) {' '.join(fields)}\n")
    (root / str(pid) / "cgroup").write_text(cgroup)
