"""Scenario A2: the same usage on cgroup v1 with the cgroupfs driver (cpuacct, total_*)."""

from __future__ import annotations

import pytest

from cgroups import CgroupVersion, Driver
from metriccache import kinds
from tests.agent.builders import (
    SCENARIO_A_CPU_US,
    SCENARIO_A_MEMORY,
    container_id,
    run_scenario_a,
    scenario_a_pods,
)
from tests.agent.conftest import MakeHost
from tests.cgroupfs_builder import V1Mounts

MOUNTS = [
    pytest.param(V1Mounts.SEPARATE, id="cpu-cpuacct-separate"),
    pytest.param(V1Mounts.COMOUNTED, id="cpu-cpuacct-comounted"),
]


@pytest.mark.parametrize("mounts", MOUNTS)
def test_detects_v1_and_cgroupfs_through_the_agent(
    host_factory: MakeHost, mounts: V1Mounts
) -> None:
    """The assembled agent reads the tree as cgroup v1 with the cgroupfs driver."""
    host = host_factory(CgroupVersion.V1, Driver.CGROUPFS, scenario_a_pods(), v1_mounts=mounts)
    assert (host.agent.fs.version, host.agent.fs.driver) == (CgroupVersion.V1, Driver.CGROUPFS)


@pytest.mark.parametrize("mounts", MOUNTS)
def test_identical_numbers_to_v2(host_factory: MakeHost, mounts: V1Mounts) -> None:
    """cpuacct.usage deltas give 500m/250m/0m; total_* memory keys give the working set."""
    host = host_factory(CgroupVersion.V1, Driver.CGROUPFS, scenario_a_pods(), v1_mounts=mounts)
    run_scenario_a(host)
    for uid, usec in SCENARIO_A_CPU_US.items():
        cid = container_id(uid)
        memory = sum(SCENARIO_A_MEMORY[uid].values())
        assert host.last(kinds.POD_CPU_USAGE, pod_uid=uid) == usec / 1e6
        assert host.last(kinds.CONTAINER_CPU_USAGE, pod_uid=uid, container_id=cid) == usec / 1e6
        assert host.last(kinds.POD_MEMORY_USAGE, pod_uid=uid) == memory
        assert host.last(kinds.CONTAINER_MEMORY_USAGE, pod_uid=uid, container_id=cid) == memory
    measured = [host.last(kinds.POD_CPU_USAGE, pod_uid=u) for u in SCENARIO_A_CPU_US]
    assert [None if m is None else round(m * 1000) for m in measured] == [500, 250, 0]


def test_v1_throttling_comes_from_the_cpu_mount(host_factory: MakeHost) -> None:
    """On v1 the throttled ratio reads cpu/…/cpu.stat while usage reads cpuacct."""
    pods = scenario_a_pods()
    host = host_factory(CgroupVersion.V1, Driver.CGROUPFS, pods)
    host.round()
    host.step(1.0)
    host.tree.advance_cpu(host.tree.pod_dir(pods[0]), 1_000_000, periods=10, throttled=5)
    host.round()
    assert host.last(kinds.POD_CPU_THROTTLED_RATIO, pod_uid=pods[0].uid) == 0.5


def test_v1_systemd_driver_is_detected_too(host_factory: MakeHost) -> None:
    """A v1 host whose kubelet uses systemd slices is read with the systemd layout."""
    host = host_factory(CgroupVersion.V1, Driver.SYSTEMD, scenario_a_pods())
    run_scenario_a(host)
    assert host.agent.fs.driver is Driver.SYSTEMD
    assert host.last(kinds.POD_CPU_USAGE, pod_uid=scenario_a_pods()[0].uid) == 0.5
