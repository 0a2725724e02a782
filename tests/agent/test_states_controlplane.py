"""The states informer against the real API server: own Node, own Pods, NodeSLO, NodeMetric."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from agent import health, states, telemetry
from cgroups import Driver
from kube import events, rest
from testbed import localcluster
from tests.agent.clusterkit import (
    NODEMETRICS,
    cleanup_cluster_objects,
    create_nodemetric,
    scenario_pod,
)
from tests.waiting import eventually

pytestmark = pytest.mark.controlplane

NODESLOS = "/apis/slo.koordinator.sh/v1alpha1/nodeslos"


@pytest.fixture
def node_name(kube: rest.Rest) -> Iterator[str]:
    name = f"st-{uuid.uuid4().hex[:8]}"
    localcluster.register_node(kube, name, cpu="8")
    yield name
    cleanup_cluster_objects(kube, name)


@pytest.fixture
def informer(kube: rest.Rest, node_name: str) -> Iterator[tuple[states.States, health.Readiness]]:
    readiness = health.Readiness()
    recorder = events.Recorder(kube, "nodeqos-agent", node_name)
    found = states.States(kube, node_name, Driver.SYSTEMD, readiness, recorder)
    found.start()
    yield found, readiness
    found.stop()


def put_nodeslo(kube: rest.Rest, node: str, spec: dict[str, Any]) -> None:
    body = {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO"}
    try:
        current = kube.get(f"{NODESLOS}/{node}")
    except rest.ApiError:
        kube.create(NODESLOS, {**body, "metadata": {"name": node}, "spec": spec})
    else:
        kube.replace(f"{NODESLOS}/{node}", {**current, "spec": spec})


def test_own_node_and_own_pods_with_their_cgroups(
    kube: rest.Rest,
    namespace: str,
    node_name: str,
    informer: tuple[states.States, health.Readiness],
) -> None:
    """Only this node and the pods bound to it; cgroup dirs follow; container IDs arrive."""
    found, readiness = informer
    other = f"{node_name}-other"
    localcluster.register_node(kube, other)
    try:
        mine = kube.create(
            f"/api/v1/namespaces/{namespace}/pods", scenario_pod("mine", node_name, cpu="250m")
        )
        kube.create(f"/api/v1/namespaces/{namespace}/pods", scenario_pod("theirs", other))
        assert found.wait_synced(10)
        node = eventually(found.node, "the Node")
        assert node.name == node_name and node.capacity.cpu == 8000
        pods = eventually(found.pods, "the bound pod")
        assert [p.name for p in pods] == ["mine"]
        uid = mine["metadata"]["uid"]
        assert pods[0].cgroup_dir == PurePosixPath(
            "kubepods.slice/kubepods-burstable.slice/"
            f"kubepods-burstable-pod{uid.replace('-', '_')}.slice"
        )
        assert pods[0].containers[0].cgroup_dir is None  # not started yet
        version = found.pods_version
        running = localcluster.mark_running(kube, mine)
        cid = running["status"]["containerStatuses"][0]["containerID"].split("://")[1]
        eventually(lambda: found.pods()[0].containers[0].id == cid, "the container ID")
        assert found.pods_version > version
        assert found.pods()[0].containers[0].cgroup_dir == pods[0].cgroup_dir / (
            f"cri-containerd-{cid}.scope"
        )
        eventually(
            lambda: all(s.ready for n, s in readiness.snapshot().items()),
            "every informer ready",
        )
        assert sorted(readiness.snapshot()) == [
            "states/node",
            "states/nodemetric",
            "states/nodeslo",
            "states/pods",
        ]
    finally:
        cleanup_cluster_objects(kube, other)


def test_nodeslo_defaults_merge_last_good_and_event(
    kube: rest.Rest, node_name: str, informer: tuple[states.States, health.Readiness]
) -> None:
    """Missing: defaults; valid: merged; malformed: last good kept and an Event; deleted: defaults."""
    found, _readiness = informer
    assert found.wait_synced(10)
    assert found.node_slo().thresholds.enable is False
    put_nodeslo(
        kube,
        node_name,
        {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressThresholdPercent": 50}},
    )
    eventually(lambda: found.node_slo().thresholds.enable, "the NodeSLO applied")
    good = found.node_slo()
    assert good.thresholds.cpu_suppress_threshold_percent == 50
    assert good.thresholds.memory_evict_lower_percent == 68

    # the CRD schema admits it, the merge does not: lower watermark above the threshold
    bad = {"resourceUsedThresholdWithBE": {"enable": False, "memoryEvictLowerPercent": 90}}
    put_nodeslo(kube, node_name, bad)

    def warning() -> list[dict[str, Any]]:
        listed = kube.get("/api/v1/namespaces/default/events")["items"]
        return [
            e
            for e in listed
            if e["involvedObject"]["kind"] == "NodeSLO"
            and e["involvedObject"]["name"] == node_name
            and e["reason"] == states.INVALID_NODESLO_REASON
        ]

    (event,) = eventually(warning, "the InvalidNodeSLO Event")
    assert event["type"] == "Warning"
    assert event["involvedObject"]["apiVersion"] == "slo.koordinator.sh/v1alpha1"
    assert (
        "memoryEvictLowerPercent: must be less than memoryEvictThresholdPercent"
        in (event["message"])
    )
    assert found.node_slo() is good  # the last good one stays in force

    kube.delete(f"{NODESLOS}/{node_name}")
    eventually(lambda: found.node_slo().thresholds.enable is False, "the defaults back")


def test_nodemetric_copy(
    kube: rest.Rest, node_name: str, informer: tuple[states.States, health.Readiness]
) -> None:
    """The NodeMetric informer: None while absent (and synced), the raw object once created."""
    found, _readiness = informer
    eventually(lambda: found.nodemetric_synced, "the NodeMetric informer synced")
    assert found.nodemetric() is None
    create_nodemetric(kube, node_name, {"reportIntervalSeconds": 45})
    obj = eventually(found.nodemetric, "the NodeMetric")
    assert obj["spec"]["metricCollectPolicy"] == {"reportIntervalSeconds": 45}
    kube.delete(f"{NODEMETRICS}/{node_name}")
    eventually(lambda: found.nodemetric() is None, "the NodeMetric gone")


def test_nodeslo_gauges_follow_the_informer(
    kube: rest.Rest, node_name: str, informer: tuple[states.States, health.Readiness]
) -> None:
    """A NodeSLO written to the API server shows in the agent's threshold gauges."""
    found, _readiness = informer
    registry = CollectorRegistry()
    registry.register(telemetry.NodeSLOCollector(found.node_slo))
    assert found.wait_synced(10)
    put_nodeslo(
        kube,
        node_name,
        {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressThresholdPercent": 37}},
    )
    eventually(
        lambda: (
            registry.get_sample_value("nodeqos_agent_nodeslo_cpu_suppress_threshold_percent")
            == 37.0
        ),
        "the gauge at 37",
    )
    assert registry.get_sample_value("nodeqos_agent_nodeslo_resource_threshold_enabled") == 1.0
