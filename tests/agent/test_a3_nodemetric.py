"""A3: the agent, in cluster mode on a fake node of known usage, publishes a valid NodeMetric.

The agent runs as a real process against the local control plane; the fake
node's counters move in real time (`clusterkit.LiveNode`): node CPU 1.5 cores
and 4 GiB, three pods using 500m, 250m and 0m. The published status must have
the exact shape of SCENARIOS.md A3 and numbers within 5 %.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from kube import rest, slo
from testbed import controlplane, localcluster
from tests.agent.clusterkit import (
    EMPTY_USAGE,
    GIB,
    NODEMETRICS,
    AgentProcess,
    LiveNode,
    cleanup_cluster_objects,
    create_nodemetric,
    create_running_pod,
    scenario_pod,
    seed_cache,
    wait_for_report,
)

pytestmark = pytest.mark.controlplane

MIB = 1 << 20
AGGREGATIONS = ["avg", "p50", "p90", "p95", "p99"]
# name -> (pod body arguments, cores used, memory.stat working-set values)
PODS: dict[str, tuple[dict[str, Any], float, dict[str, int]]] = {
    "api": (
        {"cpu": "1", "limits": True},
        0.5,
        {"active_anon": 200 * MIB, "inactive_anon": 100 * MIB},
    ),
    "web": (
        {"cpu": "500m", "labels": {"koordinator.sh/priority-class": "koord-mid"}},
        0.25,
        {"active_anon": 50 * MIB, "unevictable": 30 * MIB},
    ),
    "batch": ({}, 0.0, {"active_anon": 6 * MIB, "inactive_anon": 4 * MIB}),
}
CLASSES = {"api": ("koord-prod", "LSR"), "web": ("koord-mid", "LS"), "batch": ("koord-batch", "BE")}
PAGE_CACHE = {"inactive_file": 500 * MIB, "active_file": 700 * MIB}  # must not count
NODE_CPU = 1.5
NODE_MEMORY = 4 * GIB


@pytest.fixture
def node_name(kube: rest.Rest) -> Iterator[str]:
    name = f"a3-{uuid.uuid4().hex[:8]}"
    localcluster.register_node(kube, name)
    yield name
    cleanup_cluster_objects(kube, name)


def approx(expected: float) -> Any:
    return pytest.approx(expected, rel=0.05, abs=5)  # 5 %, and 5m/5 bytes around zero


def usage(resource_map: dict[str, Any]) -> tuple[int, int]:
    """(cpu millicores, memory bytes) of a wire ResourceMap."""
    parsed = slo.resource_map_from_api(resource_map)
    return parsed.cpu, parsed.memory


def check_shape(status: dict[str, Any], durations: list[str]) -> None:
    """Every key of A3 (and the peak predictor's) and no other, every usage in the
    {"resources": ...} shape.

    (The API server returns keys sorted, so sets are compared, not orders.)
    """
    predicted = {"prodReclaimableMetric", "prodPeakMetric"}
    assert set(status) <= {"updateTime", "nodeMetric", "podsMetric", *predicted}
    assert {"updateTime", "nodeMetric"} <= set(status)
    for key in predicted & set(status):  # Koordinator's {resource: ResourceMap}
        assert set(status[key]) == {"resource"}
        assert set(status[key]["resource"]["resources"]) == {"cpu", "memory"}
    node = status["nodeMetric"]
    assert set(node) == {
        "nodeUsage",
        "aggregatedNodeUsages",
        "systemUsage",
        "aggregatedSystemUsages",
    }
    for key in ("nodeUsage", "systemUsage"):
        assert set(node[key]) == {"resources"} and set(node[key]["resources"]) == {"cpu", "memory"}
    for key in ("aggregatedNodeUsages", "aggregatedSystemUsages"):
        assert [a["duration"] for a in node[key]] == durations
        for entry in node[key]:
            assert set(entry) == {"usage", "duration"}
            assert set(entry["usage"]) == set(AGGREGATIONS)
            for resource_map in entry["usage"].values():
                assert resource_map == {} or set(resource_map["resources"]) == {"cpu", "memory"}
    for pod in status.get("podsMetric", ()):
        assert set(pod) == {"name", "namespace", "podUsage", "priority", "qos"}
        assert set(pod["podUsage"]) == {"resources"}
    keys = [(p["namespace"], p["name"]) for p in status.get("podsMetric", ())]
    assert keys == sorted(keys)
    # our models read it back unchanged: the wire form is canonical
    assert slo.NodeMetricStatus.from_api(status).to_api() == status


def test_published_nodemetric_has_the_exact_shape_and_numbers(
    kube: rest.Rest,
    control_plane: controlplane.ControlPlane,
    namespace: str,
    node_name: str,
    tmp_path: Path,
) -> None:
    """Windows 10s/20s, 10 s average: every usage within 5 % of the fake node's, classes right."""
    live = LiveNode(tmp_path, node_cpu=NODE_CPU, used_gib=4)
    for name, (body, cores, memory) in PODS.items():
        pod = create_running_pod(kube, namespace, scenario_pod(name, node_name, **body))
        live.add_api_pod(pod, cpu=cores, **memory, **PAGE_CACHE)
    create_nodemetric(
        kube,
        node_name,
        {
            "aggregateDurationSeconds": 10,
            "reportIntervalSeconds": 30,
            "nodeAggregatePolicy": {"durations": ["10s", "20s"]},
        },
    )
    with AgentProcess(tmp_path, control_plane.kubeconfig, live, node_name) as agent:
        first = wait_for_report(kube, node_name)
        check_shape(first["status"], ["10s", "20s"])
        assert first["spec"]["metricCollectPolicy"]["reportIntervalSeconds"] == 30  # kept
        # the next report (30 s later) has both windows covered
        second = wait_for_report(kube, node_name, after=first["status"]["updateTime"], timeout=40)
        health_code, health = agent.get("/healthz")
        successes = agent.metric("nodeqos_agent_nodemetric_reports_total", {"result": "success"})
        plugin_errors = agent.get("/metrics")[1].count("nodeqos_agent_plugin_errors_total{")
        assert agent.terminate() == 0, agent.log()[-3000:]
    status = second["status"]
    check_shape(status, ["10s", "20s"])
    node = status["nodeMetric"]
    pods_memory = sum(sum(memory.values()) for _body, _cores, memory in PODS.values())
    pods_cpu = sum(cores for _body, cores, _memory in PODS.values())
    assert usage(node["nodeUsage"]) == (approx(NODE_CPU * 1000), NODE_MEMORY)
    assert usage(node["systemUsage"]) == (
        approx((NODE_CPU - pods_cpu) * 1000),
        NODE_MEMORY - pods_memory,
    )
    for key, cpu, memory in (
        ("aggregatedNodeUsages", NODE_CPU, NODE_MEMORY),
        ("aggregatedSystemUsages", NODE_CPU - pods_cpu, NODE_MEMORY - pods_memory),
    ):
        for entry in node[key]:
            values = {a: usage(entry["usage"][a]) for a in AGGREGATIONS}
            assert values["avg"] == (approx(cpu * 1000), memory)
            assert values["p50"] == (approx(cpu * 1000), memory)
            cpus = [values[a][0] for a in ("p50", "p90", "p95", "p99")]
            assert cpus == sorted(cpus)
    assert [p["name"] for p in status["podsMetric"]] == ["api", "batch", "web"]
    for pod in status["podsMetric"]:
        _body, cores, memory = PODS[pod["name"]]
        assert pod["namespace"] == namespace
        assert (pod["priority"], pod["qos"]) == CLASSES[pod["name"]]
        assert usage(pod["podUsage"]) == (approx(cores * 1000), sum(memory.values()))
    # the agent's own view of it
    assert health_code == 200, health
    assert successes is not None and successes >= 2
    assert plugin_errors == 0  # BECPUSuppress and CPUBurst ran on the fake tree without error


def test_the_server_enforces_the_schema_on_what_the_agent_writes(
    kube: rest.Rest, node_name: str
) -> None:
    """The status subresource is validated: a malformed quantity is refused (422)."""
    body = slo.NodeMetric.for_node(node_name).to_api()
    del body["status"]
    created = kube.create(NODEMETRICS, body)
    created["status"] = {"nodeMetric": {"nodeUsage": {"resources": {"cpu": "lots"}}}}
    with pytest.raises(rest.ApiError) as refused:
        kube.replace(f"{NODEMETRICS}/{node_name}/status", created)
    assert refused.value.status == 422


def test_default_windows_created_object_and_half_coverage(
    kube: rest.Rest,
    control_plane: controlplane.ControlPlane,
    node_name: str,
    tmp_path: Path,
) -> None:
    """No NodeMetric, no NodeSLO, 4 min of history: created with defaults; 5m full, 10m/30m empty."""
    cache_path = tmp_path / "state" / "metriccache.db"
    cache_path.parent.mkdir()
    seed_cache(
        cache_path,
        seconds=240,
        node_cpu=NODE_CPU,
        node_memory=NODE_MEMORY,
        system_cpu=NODE_CPU,
        system_memory=NODE_MEMORY,
    )
    live = LiveNode(tmp_path, node_cpu=NODE_CPU, used_gib=4)
    with AgentProcess(
        tmp_path, control_plane.kubeconfig, live, node_name, cache_path=cache_path
    ) as agent:
        obj = wait_for_report(kube, node_name)
        _code, health = agent.get("/healthz")
        agent.terminate()
    defaults = slo.NodeMetricCollectPolicy.defaults().to_api()
    assert obj["spec"] == {"metricCollectPolicy": defaults}
    node = obj["status"]["nodeMetric"]
    check_shape(obj["status"], ["5m0s", "10m0s", "30m0s"])
    for key in ("aggregatedNodeUsages", "aggregatedSystemUsages"):
        five, ten, thirty = node[key]
        for aggregation in AGGREGATIONS:
            assert usage(five["usage"][aggregation]) == (approx(NODE_CPU * 1000), NODE_MEMORY)
        # 4 minutes cover less than half of 10 and 30 minutes: present but empty
        assert ten["usage"] == EMPTY_USAGE and thirty["usage"] == EMPTY_USAGE
    assert obj["status"].get("podsMetric") is None  # no pods on this node
    parsed = slo.NodeMetricStatus.from_api(obj["status"])
    assert parsed.node_metric is not None
    assert parsed.node_metric.aggregated(timedelta(minutes=10), slo.AggregationType.P99) is None
    # no NodeSLO on this node: its informer is ready all the same (nothing waits for one)
    assert '"states/nodeslo": {"ready": true' in health
