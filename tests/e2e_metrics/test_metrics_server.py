"""The real metrics-server on the real local nodes, read the way LowNodeUtilization's
`metricsUtilization: {source: KubernetesMetrics}` reads it (issue #27).

Its own cluster, not tests/e2e's: the API server needs the aggregation layer's
front-proxy flags and the kubelets must let metrics-server scrape them
(`testbed.metricsserver`). One set of real nodes per machine: pytest tears the
e2e package's cluster down before this package starts.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from descheduler import usagesources
from kube import rest
from kube.quantity import Resources
from testbed import controlplane, localnodes, metricsserver
from tests.e2e import pods

pytestmark = pytest.mark.e2e

NODES = ("ma", "mb")
NS = "default"


@dataclass
class Cluster:
    plane: controlplane.ControlPlane
    kube: rest.Rest


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    try:
        cp_bin = controlplane.find_binaries()
        node_bin = localnodes.NodeBinaries.find()
    except (controlplane.ControlPlaneError, localnodes.NodeError) as err:
        pytest.fail(f"the real-node cluster is unavailable: {err}", pytrace=False)
    with tempfile.TemporaryDirectory(prefix="nodeqos-ms-") as tmp:
        workdir = Path(tmp)
        flags = metricsserver.front_proxy_flags(workdir / "front-proxy")
        with (
            localnodes.control_plane(NODES, binaries=cp_bin, apiserver_args=flags) as plane,
            localnodes.running_nodes(
                plane,
                NODES,
                workdir=workdir / "nodes",
                binaries=node_bin,
                kubelet_extra=metricsserver.KUBELET_EXTRA,
            ),
            metricsserver.running(
                plane,
                localnodes.node_ip(plane, NODES[0]),
                NODES,
                workdir=workdir / "metrics-server",
            ),
        ):
            yield Cluster(plane, rest.Rest(rest.api_client(plane.kubeconfig), qps=0))


def test_node_and_pod_metrics_come_from_the_real_kubelets(cluster: Cluster) -> None:
    """NodeMetrics for every node, PodMetrics for a busy and an idle pod, through the API server."""
    kube = cluster.kube
    kube.create(
        f"/api/v1/namespaces/{NS}/pods",
        pods.pod("busy", node="ma", command=pods.BUSY_LOOP, cpu="100m", requests_only=True),
    )
    kube.create(f"/api/v1/namespaces/{NS}/pods", pods.pod("idle", node="mb"))
    pods.wait_running(kube, NS, ["busy", "idle"])
    reader = usagesources.MetricsServer(kube)

    def both_pods() -> dict[str, Resources] | None:
        listed = reader.pods_in(NS, {"busy", "idle", "absent"})
        return listed if {f"{NS}/busy", f"{NS}/idle"} <= set(listed) else None

    listed = pods.wait_for(both_pods, "PodMetrics of busy and idle", timeout=120, interval=2)
    nodes = reader.nodes()
    assert set(NODES) <= set(nodes)
    for name in NODES:
        assert nodes[name].usage["cpu"] > 0 and nodes[name].usage["memory"] > 0
    busy, idle = listed[f"{NS}/busy"], listed[f"{NS}/idle"]
    assert set(listed) == {f"{NS}/busy", f"{NS}/idle"}  # only the named pods are decoded
    # one pod's GET reads what the list did; a pod metrics-server has no metrics for is None
    got = reader.pod(NS, "idle")
    assert got is not None and got["memory"] > 0
    assert reader.pod(NS, "absent") is None
    # a busy loop on a shared 2-core machine gets well over 50m; `sleep` next to nothing
    assert busy["cpu"] > 50 and busy["cpu"] > idle["cpu"]
    assert idle["memory"] > 0
