"""The in-cluster agent process: NodeSLO to QoS plugins on the fake tree, /healthz, clean stop."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent import kinds as agent_kinds
from kube import rest
from metriccache import MetricCache, kinds
from testbed import controlplane, localcluster
from tests.agent.clusterkit import (
    AgentProcess,
    LiveNode,
    cleanup_cluster_objects,
    create_running_pod,
    scenario_pod,
)
from tests.waiting import eventually

pytestmark = pytest.mark.controlplane

NODESLOS = "/apis/slo.koordinator.sh/v1alpha1/nodeslos"
SUPPRESS = {
    "resourceUsedThresholdWithBE": {
        "enable": True,
        "cpuSuppressPolicy": "cfsQuota",
        "cpuSuppressThresholdPercent": 65,
    }
}


@pytest.fixture
def node_name(kube: rest.Rest) -> Iterator[str]:
    name = f"ag-{uuid.uuid4().hex[:8]}"
    localcluster.register_node(kube, name, cpu="4")
    yield name
    cleanup_cluster_objects(kube, name)


def be_quota(live: LiveNode) -> list[str]:
    """The best-effort QoS cgroup's `cpu.max`: [quota, period]."""
    return (
        (live.cgroup_root / "kubepods.slice/kubepods-besteffort.slice/cpu.max").read_text().split()
    )


def test_nodeslo_drives_cpu_suppress_in_the_fake_tree(
    kube: rest.Rest,
    control_plane: controlplane.ControlPlane,
    namespace: str,
    node_name: str,
    tmp_path: Path,
) -> None:
    """NodeSLO on: BE quota set under --cgroup-root; malformed: kept; deleted: recovered."""
    live = LiveNode(tmp_path, node_cpu=1.0)
    ls = create_running_pod(kube, namespace, scenario_pod("ls", node_name, cpu="500m"))
    be = create_running_pod(kube, namespace, scenario_pod("be", node_name))
    live.add_api_pod(ls, cpu=0.5, active_anon=64 << 20)
    live.add_api_pod(be, cpu=0.0, active_anon=8 << 20)
    kube.create(
        NODESLOS,
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeSLO",
            "metadata": {"name": node_name},
            "spec": SUPPRESS,
        },
    )
    assert be_quota(live) == ["max", "100000"]
    with AgentProcess(tmp_path, control_plane.kubeconfig, live, node_name) as agent:
        # budget = 4000 * 65% - 500 (LS pod) - max(500 system, 0 reserved) = 1600m
        # a read may land between the agent's truncate and write of the file: [] then
        quota = eventually(lambda: (q := be_quota(live)) and q[0] != "max" and q, "a quota")
        assert 120_000 <= int(quota[0]) <= 200_000 and quota[1] == "100000", quota

        current = kube.get(f"{NODESLOS}/{node_name}")
        current["spec"] = {
            "resourceUsedThresholdWithBE": {"enable": False, "memoryEvictLowerPercent": 90}
        }
        kube.replace(f"{NODESLOS}/{node_name}", current)
        eventually(lambda: _events(kube, node_name), "the agent's InvalidNodeSLO Event", 10)
        time.sleep(2)  # several plugin ticks: the last good spec (enabled) stays in force
        assert be_quota(live)[0] != "max"

        kube.delete(f"{NODESLOS}/{node_name}")  # no NodeSLO: defaults, suppression off
        eventually(lambda: be_quota(live) == ["max", "100000"], "the quota recovered", 10)

        code, body = eventually(
            lambda: (got := agent.get("/healthz"))[0] == 200 and got, "/healthz 200 (reporter)"
        )
        health = json.loads(body)
        errors = agent.metric("nodeqos_agent_plugin_errors_total")
        stopping = time.time()
        assert agent.terminate() == 0, agent.log()[-3000:]
    assert code == 200, body
    assert sorted(health["components"]) == [
        "collector",
        "metriccache",
        "qosmanager",
        "qosmanager/BECPUSuppress",
        "qosmanager/BatchResource",
        "qosmanager/CPUBurst",
        "reporter",
        "states/node",
        "states/nodemetric",
        "states/nodeslo",
        "states/pods",
    ]
    assert errors is None  # no plugin ever failed (the family has no sample)
    assert "Traceback" not in agent.log()
    # SIGTERM flushed the cache: the last samples are there
    cache = MetricCache.open(agent.cache_path, kinds=agent_kinds.registry(), flush_interval=None)
    try:
        last = cache.aggregate(kinds.NODE_CPU_USAGE, {}, stopping - 10, stopping + 10)
    finally:
        cache.close()
    assert last is not None and last.last_time > stopping - 1.0


def _events(kube: rest.Rest, node: str) -> list[dict[str, Any]]:
    listed = kube.get("/api/v1/namespaces/default/events")["items"]
    return [
        e
        for e in listed
        if e["involvedObject"]["name"] == node
        and e["reason"] == "InvalidNodeSLO"
        and e["source"]["component"] == "nodeqos-agent"
    ]
