"""Collectors fail partially and visibly: a bad pod costs its own samples, nothing more."""

from __future__ import annotations

import pytest

from cgroups import CgroupVersion, Driver
from metriccache import kinds
from tests.agent.builders import (
    UID_B,
    UID_BE,
    UID_G,
    FakeHost,
    container_id,
    scenario_a_pods,
)
from tests.agent.conftest import MakeHost
from tests.cgroupfs_builder import FakePod

V2, V1, SYSTEMD, CGROUPFS = CgroupVersion.V2, CgroupVersion.V1, Driver.SYSTEMD, Driver.CGROUPFS


def _advance_all(pods: list[FakePod], host: FakeHost) -> None:
    for pod in pods:
        host.tree.advance_cpu(host.tree.pod_dir(pod), 100_000_000)
        host.tree.advance_cpu(host.tree.container_dir(pod, pod.containers[0]), 100_000_000)


def test_vanished_pod_costs_only_its_samples(host_factory: MakeHost) -> None:
    """A pod removed between two rounds: its samples are missing, the others present, gone +1."""
    pods = scenario_a_pods()
    host = host_factory(V2, SYSTEMD, pods)
    host.round()
    host.step(1.0)
    _advance_all(pods, host)
    host.tree.remove(host.tree.pod_dir(pods[1]))
    host.round()
    assert host.last(kinds.POD_CPU_USAGE, pod_uid=UID_B) is None
    assert host.last(kinds.POD_MEMORY_USAGE, pod_uid=UID_B) is None
    cid = container_id(UID_B)
    assert host.last(kinds.CONTAINER_MEMORY_USAGE, pod_uid=UID_B, container_id=cid) is None
    for uid in (UID_G, UID_BE):
        assert host.last(kinds.POD_CPU_USAGE, pod_uid=uid) == pytest.approx(0.1)  # float32
        assert host.last(kinds.POD_MEMORY_USAGE, pod_uid=uid) is not None
    assert host.errors("pods", "gone") == 1
    assert host.last(kinds.NODE_MEMORY_USAGE) is not None  # the round itself went on


def test_vanished_pod_is_forgotten_not_retried(host_factory: MakeHost) -> None:
    """After one 'gone' the pod is no longer read, so the counter does not keep climbing."""
    pods = scenario_a_pods()
    host = host_factory(V1, CGROUPFS, pods)
    host.round()
    host.tree.remove(host.tree.pod_dir(pods[0]))
    for _ in range(3):
        host.step(1.0)
        host.round()
    assert host.errors("pods", "gone") == 1


def test_restarted_container_is_found_again(host_factory: MakeHost) -> None:
    """A container dir replaced by a new one: one 'gone', then the new container is read."""
    pods = scenario_a_pods()
    host = host_factory(V2, SYSTEMD, pods)
    pod = pods[0]
    host.round()
    host.tree.remove(host.tree.container_dir(pod, pod.containers[0]))
    host.step(1.0)
    host.round()
    assert host.errors("pods", "gone") == 1
    assert host.last(kinds.POD_MEMORY_USAGE, pod_uid=pod.uid) is not None  # pod still read
    new_cid = "d" * 64
    host.tree.write_values(
        host.tree.pod_dir(pod) / f"cri-containerd-{new_cid}.scope",
        pod.containers[0].values,
    )
    host.step(1.0)
    host.round()
    labels = {"pod_uid": pod.uid, "container_id": new_cid}
    assert host.last(kinds.CONTAINER_MEMORY_USAGE, **labels) is not None
    assert host.last(kinds.CONTAINER_CPU_USAGE, **labels) is None  # its first reading


def test_counter_reset_drops_that_rounds_rate(host_factory: MakeHost) -> None:
    """Usage going down (a recreated cgroup) yields no sample, never a negative one."""
    pods = scenario_a_pods()
    host = host_factory(V2, SYSTEMD, pods)
    pod_dir = host.tree.pod_dir(pods[0])
    host.round()
    host.step(1.0)
    host.tree.update(pod_dir, cpu_usage_ns=2_000_000_000)  # was 40 s of CPU
    host.round()
    assert host.last(kinds.POD_CPU_USAGE, pod_uid=UID_G) is None
    host.step(1.0)
    host.tree.advance_cpu(pod_dir, 300_000_000)
    host.round()
    assert host.last(kinds.POD_CPU_USAGE, pod_uid=UID_G) == pytest.approx(0.3)  # float32
    every = host.agent.cache.aggregate(
        kinds.POD_CPU_USAGE, {"pod_uid": UID_G}, 0, host.clock.time()
    )
    assert every is not None and every.count == 1 and every.p50 >= 0


def test_malformed_file_is_counted_as_malformed(host_factory: MakeHost) -> None:
    """A memory.stat that does not parse costs that pod's samples with reason 'malformed'."""
    pods = scenario_a_pods()
    host = host_factory(V2, SYSTEMD, pods)
    (host.tree.root / host.tree.pod_dir(pods[2]) / "memory.stat").write_text("garbage\n")
    host.round()
    assert host.errors("pods", "malformed") == 1
    assert host.last(kinds.POD_MEMORY_USAGE, pod_uid=UID_BE) is None
    assert host.last(kinds.POD_MEMORY_USAGE, pod_uid=UID_G) is not None


def test_missing_proc_file_is_counted_against_the_node_collector(host_factory: MakeHost) -> None:
    """/proc/meminfo vanishing costs node memory only; pods are still collected."""
    host = host_factory(V2, SYSTEMD, scenario_a_pods())
    (host.proc_root / "meminfo").unlink()
    host.round()
    assert host.errors("node", "gone") == 1
    assert host.last(kinds.NODE_MEMORY_USAGE) is None
    assert host.last(kinds.POD_MEMORY_USAGE, pod_uid=UID_G) is not None
