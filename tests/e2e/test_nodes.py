"""Real nodes: each kubelet runs its pods in its own containerd, cgroup root and network."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed import controlplane
from tests.e2e import pods
from tests.e2e.conftest import RealCluster

pytestmark = [pytest.mark.e2e, pytest.mark.controlplane, pytest.mark.slow]


def test_nodes_register_ready_with_the_machine_capacity(real_cluster: RealCluster) -> None:
    """Each kubelet (of the run's minor) registers its Node, Ready, untainted once the lifecycle
    controller saw it."""
    minor = controlplane.run_minor()
    for name in real_cluster.nodes:
        node = real_cluster.kube.get(f"/api/v1/nodes/{name}")
        ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"]
        assert ready == "True"
        assert int(node["status"]["capacity"]["cpu"]) >= 1
        assert node["status"]["nodeInfo"]["kubeletVersion"].startswith(f"v{minor}.")
        assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")


def test_each_node_runs_only_its_own_pods(real_cluster: RealCluster, e2e_namespace: str) -> None:
    """A pod bound to each node runs in that node's containerd, cgroup root and pod subnet."""
    kube = real_cluster.kube
    for name in real_cluster.nodes:
        kube.create(
            f"/api/v1/namespaces/{e2e_namespace}/pods",
            pods.pod(f"on-{name}", node=name, cpu="100m"),
        )
    running = pods.wait_running(kube, e2e_namespace, [f"on-{n}" for n in real_cluster.nodes])
    for p in running:
        node = real_cluster.nodes[p["spec"]["nodeName"]]
        assert p["status"]["podIP"].startswith(f"10.244.{node.index}.")
        container_id = p["status"]["containerStatuses"][0]["containerID"].split("//")[1]
        for other in real_cluster.nodes.values():
            listed = other.ctr("containers", "list", "--quiet").stdout.split()
            assert (container_id in listed) is (other is node), (container_id, other.name)
        # Guaranteed: directly under the node's kubepods, as kubelet's cgroupfs driver lays it out.
        cgroup = Path("/sys/fs/cgroup/cpu", node.cgroup_parent, "kubepods")
        pod_dir = cgroup / f"pod{p['metadata']['uid']}" / container_id
        assert (pod_dir / "cpu.cfs_quota_us").read_text().strip() == "10000"


def test_scheduler_places_pods_on_real_nodes(real_cluster: RealCluster, e2e_namespace: str) -> None:
    """kube-scheduler binds an unbound pod to one of the nodes and its kubelet runs it."""
    kube = real_cluster.kube
    kube.create(f"/api/v1/namespaces/{e2e_namespace}/pods", pods.pod("scheduled", cpu="50m"))
    (p,) = pods.wait_running(kube, e2e_namespace, ["scheduled"])
    assert p["spec"]["nodeName"] in real_cluster.nodes
