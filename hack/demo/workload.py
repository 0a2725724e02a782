"""The demo's nodes on one machine: a kubepods cgroup tree and a /proc per node.

Each demo node gets its own cgroup v1 hierarchy (cgroupfs driver) that its
agent reads through `--cgroup-root`, and its own `/proc` (`stat`, `meminfo`)
through `--proc-root`, so three agents on one machine see three nodes.

Real mode (the machine's cgroup v1 hierarchy is writable): each pod's
container cgroup holds a real busy process, held to the pod's CPU by a CFS
quota; the node's `/proc/stat` is the sum of its pods' real `cpuacct.usage`
plus a small system share. Fake mode (no writable cgroup v1): the same tree is
written into a temporary directory and a load generator advances
`cpuacct.usage` as the pods would. Either way the agents measure what they
would measure on a real node; only where the numbers come from differs.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
SUBSYSTEMS = ("cpu", "cpuacct", "memory")
PERIOD_US = 100_000
USER_HZ = 100
GIB = 1024**3
NODE_MEMORY = 16 * GIB
SYSTEM_MEMORY = int(1.6 * GIB)  # 10% of 16Gi, as SCENARIOS.md assumes
SYSTEM_CPU_CORES = 0.02  # the node's own daemons, charged to system usage


# cpu.shares of the demo's top-level cgroup (the v1 maximum): see Node.__init__.
DEMO_ROOT_SHARES = 262_144


def real_cgroups_writable() -> bool:
    """Whether cgroup v1 cpu, cpuacct and memory hierarchies can be written here."""
    probe = f"nodeqos-probe-{uuid.uuid4().hex[:8]}"
    made: list[Path] = []
    try:
        for subsystem in SUBSYSTEMS:
            base = CGROUP_ROOT / subsystem
            if not (base / "cgroup.procs").exists():
                return False
            (base / probe).mkdir()
            made.append(base / probe)
        return (made[0] / "cpu.cfs_quota_us").exists()
    except OSError:
        return False
    finally:
        for path in made:
            with contextlib.suppress(OSError):
                path.rmdir()


def _die_with_parent() -> None:  # between fork and exec: the busy loop dies with the demo
    os.setsid()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)


@dataclass
class Pod:
    """One demo pod's cgroup: a container dir under kubepods/burstable/pod<uid>."""

    uid: str
    container_id: str
    millicores: int
    rel: Path = field(init=False)
    process: subprocess.Popen[bytes] | None = None
    fake_usage_ns: float = 0.0

    def __post_init__(self) -> None:
        self.rel = Path("kubepods", "burstable", f"pod{self.uid}", self.container_id)


class NodeTree:
    """A demo node's cgroup root and /proc, with its pods' load."""

    def __init__(self, name: str, workdir: Path, *, real: bool, run_id: str) -> None:
        self.name = name
        self.real = real
        self.cgroup_root = workdir / name / "cgroup"
        self.proc_root = workdir / name / "proc"
        self.pods: dict[str, Pod] = {}
        self._started = time.monotonic()
        self._real_roots = {
            s: CGROUP_ROOT / s / f"nodeqos-demo-{run_id}" / name for s in SUBSYSTEMS
        }
        self.cgroup_root.mkdir(parents=True)
        self.proc_root.mkdir(parents=True)
        for subsystem in SUBSYSTEMS:
            target = self._real_roots[subsystem] if real else self.cgroup_root / f"{subsystem}.d"
            target.mkdir(parents=True)
            if real and (target.parent / "cpu.shares").is_file():
                # As a kubelet gives kubepods shares so pods win against the host's other
                # processes: the demo's root competes at the top level with everything else
                # on the shared machine (1024 shares each), where at load 10-18 a node's
                # busy pods got a fraction of their quota. Their quotas still cap them.
                (target.parent / "cpu.shares").write_text(str(DEMO_ROOT_SHARES))
            (self.cgroup_root / subsystem).symlink_to(target)
            for qos in ("", "burstable", "besteffort"):
                self._mkdir(subsystem, Path("kubepods", qos))
        self.write_proc()

    # -- pods --------------------------------------------------------------------

    def add_pod(self, uid: str, container_id: str, millicores: int) -> None:
        pod = Pod(uid, container_id, millicores)
        for subsystem in SUBSYSTEMS:
            self._mkdir(subsystem, pod.rel.parent)  # fake mode: the pod level's files too
            self._mkdir(subsystem, pod.rel)
        if self.real:
            quota = max(1000, millicores * PERIOD_US // 1000)
            (self.cgroup_root / "cpu" / pod.rel.parent / "cpu.cfs_quota_us").write_text(str(quota))
            pod.process = subprocess.Popen(
                [sys.executable, "-c", "while True: pass"], preexec_fn=_die_with_parent
            )
            for subsystem in SUBSYSTEMS:
                (self.cgroup_root / subsystem / pod.rel / "cgroup.procs").write_text(
                    str(pod.process.pid)
                )
        self.pods[uid] = pod

    def remove_pod(self, uid: str) -> None:
        """The kubelet's part on deletion: stop the container, remove its cgroups."""
        pod = self.pods.pop(uid, None)
        if pod is None:
            return
        if pod.process is not None:
            pod.process.kill()
            pod.process.wait()
        for subsystem in SUBSYSTEMS:
            for rel in (pod.rel, pod.rel.parent):
                with contextlib.suppress(OSError):
                    (self.cgroup_root / subsystem / rel).rmdir()

    # -- the node's /proc and the fake load -----------------------------------------

    def advance(self, seconds: float) -> None:
        """Fake mode: each pod used its share of CPU over the last `seconds`."""
        if self.real:
            return
        for pod in self.pods.values():
            pod.fake_usage_ns += pod.millicores / 1000 * seconds * 1e9
            usage = str(int(pod.fake_usage_ns))
            for rel in (pod.rel, pod.rel.parent):
                (self.cgroup_root / "cpuacct" / rel / "cpuacct.usage").write_text(usage)

    def pods_usage_ns(self) -> int:
        total = 0
        for pod in self.pods.values():
            with contextlib.suppress(OSError, ValueError):
                total += int(
                    (self.cgroup_root / "cpuacct" / pod.rel.parent / "cpuacct.usage").read_text()
                )
        return total

    def write_proc(self) -> None:
        """/proc/stat and /proc/meminfo of this node: its pods plus a little system."""
        elapsed = time.monotonic() - self._started
        busy = int(self.pods_usage_ns() / 1e9 * USER_HZ + SYSTEM_CPU_CORES * elapsed * USER_HZ)
        total = int(elapsed * USER_HZ * (os.cpu_count() or 1))
        idle = max(0, total - busy)
        stat = (
            f"cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\n"
            f"cpu0 {busy} 0 0 {idle} 0 0 0 0 0 0\n"
            f"btime {int(time.time() - elapsed)}\n"
        )
        used = SYSTEM_MEMORY + 48 * 1024**2 * len(self.pods)
        meminfo = (
            f"MemTotal:       {NODE_MEMORY // 1024} kB\n"
            f"MemFree:        {(NODE_MEMORY - used) // 1024} kB\n"
            f"MemAvailable:   {(NODE_MEMORY - used) // 1024} kB\n"
        )
        _replace(self.proc_root / "stat", stat)
        _replace(self.proc_root / "meminfo", meminfo)

    def close(self) -> None:
        """Kill every busy process and remove every cgroup this node made."""
        for uid in list(self.pods):
            self.remove_pod(uid)
        if self.real:
            for root in self._real_roots.values():
                _rmdir_tree(root)
                with contextlib.suppress(OSError):
                    root.parent.rmdir()  # the run's dir, once the last node is gone
        shutil.rmtree(self.cgroup_root.parent, ignore_errors=True)

    def _mkdir(self, subsystem: str, rel: Path) -> None:
        path = self.cgroup_root / subsystem / rel
        path.mkdir(parents=True, exist_ok=True)
        if not self.real:
            (path / "cpuacct.usage").touch(exist_ok=True)
            if not (path / "cpuacct.usage").read_text():
                (path / "cpuacct.usage").write_text("0")
            (path / "memory.stat").write_text(
                "total_inactive_anon 0\ntotal_active_anon 33554432\ntotal_unevictable 0\n"
                "total_cache 0\ntotal_rss 33554432\n"
            )
            # The agent reads the CFS counters of every pod as well: without the file
            # the pod counts as gone and has no usage in its NodeMetric.
            (path / "cpu.stat").write_text("nr_periods 0\nnr_throttled 0\nthrottled_time 0\n")


def _replace(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)  # readers never see a half-written file


def _rmdir_tree(root: Path) -> None:
    """rmdir a cgroup tree children first (cgroupfs dirs cannot be removed recursively)."""
    if not root.exists():
        return
    for dirpath, _dirnames, _files in sorted(os.walk(root), key=lambda entry: -len(entry[0])):
        with contextlib.suppress(OSError):
            Path(dirpath).rmdir()
