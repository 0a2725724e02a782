"""Scenario A1: pod and container usage on cgroup v2 with the systemd driver."""

from __future__ import annotations

import dataclasses

import pytest

from agent import kinds as agent_kinds
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


def _working_set(uid: str) -> int:
    return sum(SCENARIO_A_MEMORY[uid].values())


def test_detects_v2_and_systemd_through_the_agent(host_factory: MakeHost) -> None:
    """The assembled agent reads the tree as cgroup v2 with the systemd driver."""
    host = host_factory(CgroupVersion.V2, Driver.SYSTEMD, scenario_a_pods())
    assert (host.agent.fs.version, host.agent.fs.driver) == (CgroupVersion.V2, Driver.SYSTEMD)


@pytest.mark.parametrize(
    ("uid", "millicores"),
    [(uid, us // 1000) for uid, us in SCENARIO_A_CPU_US.items()],
    ids=["guaranteed-500m", "burstable-250m", "besteffort-0m"],
)
def test_pod_cpu_is_the_usage_delta_over_wall_time(
    host_factory: MakeHost, uid: str, millicores: int
) -> None:
    """usage_usec grows 500000/250000/0 in 1 s: the cache holds 500m/250m/0m exactly."""
    host = host_factory(CgroupVersion.V2, Driver.SYSTEMD, scenario_a_pods())
    run_scenario_a(host)
    assert host.last(kinds.POD_CPU_USAGE, pod_uid=uid) == millicores / 1000
    cid = container_id(uid)
    assert host.last(kinds.CONTAINER_CPU_USAGE, pod_uid=uid, container_id=cid) == millicores / 1000


@pytest.mark.parametrize(
    "uid", list(SCENARIO_A_MEMORY), ids=["guaranteed", "burstable", "besteffort"]
)
def test_memory_is_anon_plus_unevictable(host_factory: MakeHost, uid: str) -> None:
    """Pod and container memory = inactive_anon + active_anon + unevictable, no page cache."""
    host = host_factory(CgroupVersion.V2, Driver.SYSTEMD, scenario_a_pods())
    run_scenario_a(host)
    assert host.last(kinds.POD_MEMORY_USAGE, pod_uid=uid) == _working_set(uid)
    cid = container_id(uid)
    assert host.last(kinds.CONTAINER_MEMORY_USAGE, pod_uid=uid, container_id=cid) == _working_set(
        uid
    )


def test_first_round_has_memory_but_no_cpu_rate(host_factory: MakeHost) -> None:
    """A counter's first reading yields no rate; levels are stored at once."""
    host = host_factory(CgroupVersion.V2, Driver.SYSTEMD, scenario_a_pods())
    host.round()
    for uid in SCENARIO_A_CPU_US:
        assert host.last(kinds.POD_CPU_USAGE, pod_uid=uid) is None
        assert host.last(kinds.POD_MEMORY_USAGE, pod_uid=uid) == _working_set(uid)
    assert host.last(kinds.NODE_CPU_USAGE) is None


def test_throttled_ratio_is_the_share_of_throttled_periods(host_factory: MakeHost) -> None:
    """10 of 40 new CFS periods throttled in the interval: ratio 0.25, for pod and container."""
    pods = scenario_a_pods()
    host = host_factory(CgroupVersion.V2, Driver.SYSTEMD, pods)
    pod = pods[1]
    host.round()
    host.step(1.0)
    host.tree.advance_cpu(host.tree.pod_dir(pod), 0, periods=40, throttled=10)
    host.tree.advance_cpu(
        host.tree.container_dir(pod, pod.containers[0]), 0, periods=8, throttled=2
    )
    host.round()
    assert host.last(kinds.POD_CPU_THROTTLED_RATIO, pod_uid=pod.uid) == 0.25
    cid = container_id(pod.uid)
    ratio = host.last(kinds.CONTAINER_CPU_THROTTLED_RATIO, pod_uid=pod.uid, container_id=cid)
    assert ratio == 0.25
    # no period elapsed: not throttled at all
    assert host.last(kinds.POD_CPU_THROTTLED_RATIO, pod_uid=pods[0].uid) == 0.0


def test_pod_psi_is_collected_behind_its_gate(host_factory: MakeHost) -> None:
    """With PSICollector on, each pod's cpu/memory/io PSI avg10 lands in the cache."""
    pressure = {
        "cpu.pressure": "some avg10=12.50 avg60=3.00 avg300=1.00 total=100\n"
        "full avg10=2.25 avg60=1.00 avg300=0.50 total=50\n",
        "memory.pressure": "some avg10=1.00 avg60=0.00 avg300=0.00 total=1\n"
        "full avg10=0.50 avg60=0.00 avg300=0.00 total=1\n",
    }
    pods = scenario_a_pods()
    pods[0] = dataclasses.replace(
        pods[0], values=dataclasses.replace(pods[0].values, pressure=pressure)
    )
    host = host_factory(CgroupVersion.V2, Driver.SYSTEMD, pods, gates="PSICollector=true")
    host.round()
    uid = pods[0].uid
    assert host.last(agent_kinds.POD_PSI, pod_uid=uid, resource="cpu", kind="some") == 12.5
    assert host.last(agent_kinds.POD_PSI, pod_uid=uid, resource="cpu", kind="full") == 2.25
    assert host.last(agent_kinds.POD_PSI, pod_uid=uid, resource="memory", kind="full") == 0.5
    # io.pressure absent (no PSI for io on this "kernel"): nothing, and no error
    assert host.last(agent_kinds.POD_PSI, pod_uid=uid, resource="io", kind="some") is None
    assert host.errors("pods", "gone") == 0


def test_pod_psi_is_off_by_default(host_factory: MakeHost) -> None:
    """Without the gate, no per-pod PSI is read."""
    host = host_factory(CgroupVersion.V2, Driver.SYSTEMD, scenario_a_pods())
    host.round()
    assert host.agent.cache.aggregate_all(agent_kinds.POD_PSI, {}, 0, host.clock.time()) == {}
