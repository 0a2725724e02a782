"""`--node-usage-source=kubepods`: node CPU and memory are what the kubepods cgroup uses."""

from __future__ import annotations

import shutil
from pathlib import Path, PurePosixPath

import pytest
from click.testing import CliRunner

from agent import cli, config
from cgroups import CgroupVersion, Driver
from metriccache import kinds
from tests.agent.builders import HZ, SCENARIO_A_CPU_US, SCENARIO_A_MEMORY, scenario_a_pods
from tests.agent.conftest import MakeHost
from tests.cgroupfs_builder import V1Mounts, write_meminfo, write_pod_tree, write_proc_stat

KUBEPODS = config.NodeUsageSource.KUBEPODS
GIB_KB = 1024 * 1024
PODS_MEMORY = sum(sum(m.values()) for m in SCENARIO_A_MEMORY.values())

TREES = [
    pytest.param(CgroupVersion.V1, Driver.CGROUPFS, V1Mounts.SEPARATE, id="v1-cgroupfs"),
    pytest.param(CgroupVersion.V1, Driver.SYSTEMD, V1Mounts.COMOUNTED, id="v1-systemd-comounted"),
    pytest.param(CgroupVersion.V2, Driver.SYSTEMD, V1Mounts.SEPARATE, id="v2-systemd"),
    pytest.param(CgroupVersion.V2, Driver.CGROUPFS, V1Mounts.SEPARATE, id="v2-cgroupfs"),
]


def _kubepods(driver: Driver) -> PurePosixPath:
    return PurePosixPath("kubepods.slice" if driver is Driver.SYSTEMD else "kubepods")


@pytest.mark.parametrize(("version", "driver", "mounts"), TREES)
def test_node_usage_is_the_kubepods_subtree_not_proc(
    host_factory: MakeHost, version: CgroupVersion, driver: Driver, mounts: V1Mounts
) -> None:
    """kubepods' counter grows 1.2 s in 1 s: 1.2 cores, whatever /proc/stat says; memory is
    its anon + unevictable, neither its page cache nor MemTotal - MemAvailable."""
    host = host_factory(
        version, driver, (), available_kb=4 * GIB_KB, node_usage=KUBEPODS, v1_mounts=mounts
    )
    kubepods = _kubepods(driver)
    host.tree.update(
        kubepods,
        inactive_anon=100 << 20,
        active_anon=200 << 20,
        unevictable=4 << 20,
        inactive_file=1 << 30,
        active_file=1 << 30,
    )
    host.round()
    host.step(1.0)
    host.tree.advance_cpu(kubepods, 1_200_000_000)
    host.add_busy_ticks(2 * HZ)  # the rest of the machine is busy too; it must not count
    host.round()
    assert host.last(kinds.NODE_CPU_USAGE) == pytest.approx(1.2)
    assert host.last(kinds.NODE_MEMORY_USAGE) == 304 << 20


def test_system_usage_is_kubepods_minus_its_pods(host_factory: MakeHost) -> None:
    """The pods use 0.75 cores; kubepods 0.8 (its own processes): system 0.05, memory likewise."""
    pods = scenario_a_pods()
    host = host_factory(CgroupVersion.V1, Driver.CGROUPFS, pods, node_usage=KUBEPODS)
    kubepods = _kubepods(Driver.CGROUPFS)
    host.tree.update(kubepods, active_anon=PODS_MEMORY + (8 << 20))
    host.round()
    host.step(1.0)
    host.add_busy_ticks(3 * HZ)
    host.tree.advance_cpu(kubepods, 800_000_000)
    for pod in pods:
        grown = SCENARIO_A_CPU_US[pod.uid] * 1000
        host.tree.advance_cpu(host.tree.pod_dir(pod), grown)
        host.tree.advance_cpu(host.tree.container_dir(pod, pod.containers[0]), grown)
    host.round()
    assert host.last(kinds.NODE_CPU_USAGE) == pytest.approx(0.8)
    assert host.last(kinds.SYSTEM_CPU_USAGE) == pytest.approx(0.05)
    assert host.last(kinds.SYSTEM_MEMORY_USAGE) == 8 << 20


def test_kubepods_gone_mid_run_is_counted_and_skipped(host_factory: MakeHost) -> None:
    """kubepods removed (kubelet reset): no node sample that round, errors{node,gone} counted."""
    host = host_factory(CgroupVersion.V2, Driver.SYSTEMD, (), node_usage=KUBEPODS)
    host.round()
    host.step(1.0)
    shutil.rmtree(host.tree.root / "kubepods.slice")
    host.round()
    assert host.last(kinds.NODE_CPU_USAGE) is None
    assert host.last(kinds.NODE_MEMORY_USAGE) is None
    assert host.errors("node", "gone") == 2  # the CPU and the memory read


def test_proc_stays_the_default(host_factory: MakeHost) -> None:
    """Without the option the node is /proc: MemTotal - MemAvailable, not kubepods."""
    host = host_factory(
        CgroupVersion.V2, Driver.SYSTEMD, (), total_kb=16 * GIB_KB, available_kb=12 * GIB_KB
    )
    host.tree.update(_kubepods(Driver.SYSTEMD), active_anon=1 << 20)
    host.round()
    assert host.last(kinds.NODE_MEMORY_USAGE) == 4 << 30


def test_missing_kubepods_is_refused_at_start_naming_the_flag(tmp_path: Path) -> None:
    """A kubelet cgroup root with no kubepods below it: exit 2 naming the flags to fix."""
    tree = write_pod_tree(tmp_path / "cgroup", CgroupVersion.V1, Driver.CGROUPFS)
    proc = tmp_path / "proc"
    write_proc_stat(proc, user=1000, system=500, idle=9000)
    write_meminfo(proc, total_kb=16 * GIB_KB, available_kb=12 * GIB_KB)
    common = ["--standalone", "--cgroup-root", str(tree.root), "--proc-root", str(proc)]
    common += ["--metrics-addr", "", "--run-for", "1s"]
    common += ["--metric-cache-path", str(tmp_path / "cache.db")]
    result = CliRunner().invoke(
        cli.build_command(),
        [*common, "--node-usage-source", "kubepods", "--kubelet-cgroup-root", "/elsewhere"],
    )
    assert result.exit_code == 2, result.output
    assert "--node-usage-source" in result.output
    assert "elsewhere/kubepods" in result.output
    assert "--kubelet-cgroup-root" in result.output


def test_the_option_reaches_the_config(tmp_path: Path) -> None:
    """The flag's value is the config's enum; a value it does not know is a usage error."""
    result = CliRunner().invoke(cli.build_command(), ["--node-usage-source", "cgroup"])
    assert result.exit_code == 2
    assert "'cgroup' is not one of 'proc', 'kubepods'" in result.output
    help_text = CliRunner().invoke(cli.build_command(), ["--help"]).output
    assert "--node-usage-source" in help_text and "several kubelets" in help_text
    assert config.NodeUsageSource("kubepods") is KUBEPODS
