"""The in-cluster agent publishes prodReclaimableMetric, and its histograms survive a restart."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kube import quantity, rest
from testbed import controlplane, localcluster
from tests.agent.clusterkit import (
    AgentProcess,
    LiveNode,
    cleanup_cluster_objects,
    create_running_pod,
    nodemetric,
    scenario_pod,
)
from tests.waiting import eventually

pytestmark = pytest.mark.controlplane

# A short cold start (20 s of observation, trained every second) so the test sees both sides.
FLAGS = ("--prediction-cold-start-duration", "20s", "--prediction-training-interval", "1s")


@pytest.fixture
def node_name(kube: rest.Rest) -> Iterator[str]:
    name = f"pr-{uuid.uuid4().hex[:8]}"
    localcluster.register_node(kube, name, cpu="4")
    yield name
    cleanup_cluster_objects(kube, name)


def _reclaimable(kube: rest.Rest, node: str) -> dict[str, int] | None:
    found = nodemetric(kube, node)
    metric: Any = ((found or {}).get("status") or {}).get("prodReclaimableMetric")
    if metric is None:
        return None
    resources = quantity.Resources.from_api(metric["resource"].get("resources"))
    return {k: resources.get(k, 0) for k in (quantity.CPU, quantity.MEMORY)}


def test_prediction_is_published_after_the_cold_start_and_restored_on_restart(
    kube: rest.Rest,
    control_plane: controlplane.ControlPlane,
    namespace: str,
    node_name: str,
    tmp_path: Path,
) -> None:
    """Cold: 0 reclaimed; warm: request - peak; after a restart: warm at the first report."""
    live = LiveNode(tmp_path, node_cpu=0.2, used_gib=0)
    prod = create_running_pod(kube, namespace, scenario_pod("web", node_name, cpu="500m"))
    live.add_api_pod(prod, cpu=0.1, active_anon=64 << 20)
    with AgentProcess(tmp_path, control_plane.kubeconfig, live, node_name, extra=FLAGS) as agent:
        first = eventually(lambda: _reclaimable(kube, node_name), "a first report", 30)
        assert first == {"cpu": 0, "memory": 0}  # the cold start: nothing reclaimed
        warm = eventually(
            lambda: (r := _reclaimable(kube, node_name)) and r["cpu"] > 0 and r,
            "a warm prediction",
            60,
        )
        # 500m requested, ~0.1 core used (+10%), the system part ~0.1 core: about 280m
        assert 150 <= warm["cpu"] <= 400, warm
        assert 0 < warm["memory"] < 256 << 20, warm
        warm_gauge = agent.metric("nodeqos_agent_prediction_warm")
        assert warm_gauge == 1.0, agent.log()[-3000:]
        assert agent.terminate() == 0, agent.log()[-3000:]
        assert "histogram pair(s) saved" in agent.log()
    kube.replace(
        f"/apis/slo.koordinator.sh/v1alpha1/nodemetrics/{node_name}/status",
        {**(nodemetric(kube, node_name) or {}), "status": {}},
    )
    with AgentProcess(
        tmp_path,
        control_plane.kubeconfig,
        live,
        node_name,
        cache_path=agent.cache_path,
        extra=FLAGS,
    ) as again:
        restored = eventually(lambda: _reclaimable(kube, node_name), "a first report", 30)
        assert restored["cpu"] > 0, again.log()[-3000:]  # no new cold start
        assert "restored from the metric cache" in again.log()
        assert again.terminate() == 0
