"""The collectors against the machine's real cgroup v1 hierarchy and a real busy process.

A kubepods-like cgroupfs tree is created under a unique test root in the cpu,
cpuacct and memory hierarchies; a tmp dir whose `cpu`, `cpuacct` and `memory`
entries are symlinks to those test roots serves as the agent's cgroup root, so
the agent sees an ordinary kubepods hierarchy without any bind mount. One
busy Python process is moved into the container cgroup; the pod CPU the agent
measures must agree with the process's own utime+stime within 10%. The
process is always killed and every directory removed, children first.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

import cgroups
from agent import assembly, config
from agent.collectors import FileReader
from agent.schedule import SystemClock
from metriccache import kinds
from tests import busyprocess

pytestmark = pytest.mark.realcgroup

CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_ROOT = Path("/proc")
SUBSYSTEMS = ("cpu", "cpuacct", "memory")
BALLAST_MIB = 32
# memory.stat may trail what a cgroup is charged: the kernel counts memcg
# statistics in per-CPU batches (MEMCG_CHARGE_BATCH, 64 pages) and flushes them
# lazily, so a read right after the ballast is touched can miss up to a batch per
# CPU (seen: 22 pages short of 32 MiB on kernel 6.18).
STAT_SLACK_BYTES = 64 * 4096 * (os.cpu_count() or 1)
BALLAST_CHARGED = (BALLAST_MIB << 20) - STAT_SLACK_BYTES


def _unusable() -> str | None:
    """Why the real v1 hierarchies cannot be used here, or None if they can."""
    for subsystem, probe in (
        ("cpu", "cpu.cfs_quota_us"),
        ("cpuacct", "cpuacct.usage"),
        ("memory", "memory.stat"),
    ):
        mount = CGROUP_ROOT / subsystem
        if not (mount / probe).is_file():
            return f"{mount} is not a cgroup v1 {subsystem} hierarchy"
        if not os.access(mount, os.W_OK):
            return f"{mount} is not writable by this user"
    return None


@dataclass
class RealTree:
    fake_root: Path  # the agent's --cgroup-root
    uid: str
    cid: str
    container_dirs: list[Path]


@pytest.fixture
def real_tree(tmp_path: Path) -> Iterator[RealTree]:
    """kubepods/besteffort/pod<uid>/<cid> in cpu, cpuacct and memory; removed afterwards."""
    reason = _unusable()
    if reason is not None:
        pytest.skip(reason)
    suffix = uuid.uuid4().hex[:12]
    uid, cid = str(uuid.uuid4()), uuid.uuid4().hex * 2
    rel = ["kubepods", "besteffort", f"pod{uid}", cid]
    created: list[Path] = []
    fake_root = tmp_path / "cgroup"
    fake_root.mkdir()
    try:
        for subsystem in SUBSYSTEMS:
            test_root = CGROUP_ROOT / subsystem / f"nodeqos-test-{suffix}"
            path = test_root
            for part in [None, *rel]:
                path = path / part if part else path
                path.mkdir()
                created.append(path)
            (fake_root / subsystem).symlink_to(test_root)
        yield RealTree(fake_root, uid, cid, [d for d in created if d.name == cid])
    finally:
        for path in reversed(created):  # children first
            for _ in range(50):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)  # the killed process may still be leaving


@pytest.fixture
def busy_process(real_tree: RealTree) -> Iterator[busyprocess.BusyProcess]:
    """A spinning Python process moved into the container cgroup; always killed.

    v1 does not move memory charges with a task, so the process allocates (and
    touches) its 32 MiB only once it has been moved; the fixture returns once
    the process says its ballast is touched (`tests.busyprocess`).
    """
    with busyprocess.spinning(ballast_mib=BALLAST_MIB) as busy:
        for container_dir in real_tree.container_dirs:
            (container_dir / "cgroup.procs").write_text(str(busy.pid))
        busy.release()
        yield busy


def _process_cpu_seconds(pid: int) -> float:
    procfs = cgroups.ProcFS(PROC_ROOT)
    return procfs.ticks_to_seconds(procfs.read_pid_stat(pid).cpu_ticks)


# CPU seconds the busy process burns between the agent's two rounds: enough that
# the 10 ms resolution of its own utime+stime costs under 2 % of the comparison,
# however few cores a busy machine leaves it (beside stress-ng it got 0.13).
BURN_CPU_SECONDS = 1.0
BURN_DEADLINE_S = 60.0


def _two_rounds_around_busy_cpu(agent: assembly.Agent, pid: int) -> float:
    """Run a round, wait until `pid` has burnt BURN_CPU_SECONDS, run another; its rate.

    The rate is the process's own accounting (utime+stime) over wall time,
    read just outside the two rounds.
    """
    cpu_before, wall_before = _process_cpu_seconds(pid), time.monotonic()
    agent.collection.run_round()
    deadline = wall_before + BURN_DEADLINE_S
    while _process_cpu_seconds(pid) - cpu_before < BURN_CPU_SECONDS:
        assert time.monotonic() < deadline, (
            f"the busy process burnt under {BURN_CPU_SECONDS} CPU s in {BURN_DEADLINE_S:g} s"
        )
        time.sleep(0.1)
    agent.collection.run_round()
    cpu_after, wall_after = _process_cpu_seconds(pid), time.monotonic()
    return (cpu_after - cpu_before) / (wall_after - wall_before)


def test_pod_cpu_matches_the_process_own_accounting(
    tmp_path: Path, real_tree: RealTree, busy_process: busyprocess.BusyProcess
) -> None:
    """Over 1 CPU-second the agent's pod CPU is within 10% of the process's utime+stime rate,
    and the pod's memory holds the process's ballast."""
    cfg = config.AgentConfig(
        node_name="real",
        cgroup_root=real_tree.fake_root,
        proc_root=PROC_ROOT,
        metric_cache_path=tmp_path / "state" / "metriccache.db",
        metrics_addr=None,
        standalone=True,
    )
    clock = SystemClock()
    agent = assembly.assemble(cfg, CollectorRegistry(), clock, flush_interval=None)
    try:
        assert (agent.fs.version, agent.fs.driver) == (
            cgroups.CgroupVersion.V1,
            cgroups.Driver.CGROUPFS,
        )
        expected = _two_rounds_around_busy_cpu(agent, busy_process.pid)
        now = clock.time()
        pod = agent.cache.aggregate(kinds.POD_CPU_USAGE, {"pod_uid": real_tree.uid}, now - 5, now)
        labels = {"pod_uid": real_tree.uid, "container_id": real_tree.cid}
        container = agent.cache.aggregate(kinds.CONTAINER_CPU_USAGE, labels, now - 5, now)
        memory = agent.cache.aggregate(
            kinds.POD_MEMORY_USAGE, {"pod_uid": real_tree.uid}, now - 5, now
        )
    finally:
        agent.close()
    assert pod is not None and container is not None and memory is not None
    assert pod.last == pytest.approx(expected, rel=0.10)
    assert container.last == pytest.approx(expected, rel=0.10)
    assert memory.last >= BALLAST_CHARGED
    print(f"pod cpu {pod.last:.4f} cores vs process {expected:.4f} cores")


def test_kept_open_cgroup_file_rereads_and_reports_removal() -> None:
    """On cgroupfs a pread at 0 regenerates the file, and a removed cgroup reads as gone."""
    reason = _unusable()
    if reason is not None:
        pytest.skip(reason)
    directory = CGROUP_ROOT / "cpuacct" / f"nodeqos-test-{uuid.uuid4().hex[:12]}"
    directory.mkdir()
    reader = FileReader(max_open=4)
    try:
        usage = str(directory / "cpuacct.usage")
        assert reader.read(usage) == b"0\n"
        burn = "import sys\nsys.stdin.readline()\nsum(range(3_000_000))\n"
        with subprocess.Popen([sys.executable, "-c", burn], stdin=subprocess.PIPE) as child:
            (directory / "cgroup.procs").write_text(str(child.pid))
            child.communicate(b"go\n", timeout=30)  # it burns a little CPU inside, then exits
        assert int(reader.read(usage)) > 0  # same descriptor, fresh content
        directory.rmdir()
        with pytest.raises(cgroups.CgroupGone):
            reader.read(usage)
        assert reader.open_files == 0
    finally:
        reader.close()
        if directory.exists():
            directory.rmdir()


def test_node_usage_from_kubepods_is_the_pods_only(
    tmp_path: Path, real_tree: RealTree, busy_process: busyprocess.BusyProcess
) -> None:
    """With --node-usage-source=kubepods the node is the real kubepods subtree (the kernel's
    hierarchical cpuacct and total_* memory counters): the one busy pod, within 10%, and its
    ballast - not the whole machine, whose other processes run too."""
    cfg = config.AgentConfig(
        node_name="real",
        cgroup_root=real_tree.fake_root,
        proc_root=PROC_ROOT,
        metric_cache_path=tmp_path / "state" / "metriccache.db",
        metrics_addr=None,
        node_usage_source=config.NodeUsageSource.KUBEPODS,
        standalone=True,
    )
    clock = SystemClock()
    agent = assembly.assemble(cfg, CollectorRegistry(), clock, flush_interval=None)
    try:
        expected = _two_rounds_around_busy_cpu(agent, busy_process.pid)
        now = clock.time()
        node_cpu = agent.cache.aggregate(kinds.NODE_CPU_USAGE, {}, now - 5, now)
        node_memory = agent.cache.aggregate(kinds.NODE_MEMORY_USAGE, {}, now - 5, now)
    finally:
        agent.close()
    assert node_cpu is not None and node_memory is not None
    assert node_cpu.last == pytest.approx(expected, rel=0.10)
    assert BALLAST_CHARGED <= node_memory.last < 4 * (BALLAST_MIB << 20)
