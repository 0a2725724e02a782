"""testbed.localcluster.deployed: the install skeleton both real-node scenarios share,
on the real control plane with its controllers (they make a namespace usable)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from kube import rest
from testbed import controlplane, localcluster

CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds"
SPEC = {"metricCollectPolicy": {"aggregateDurationSeconds": 20, "reportIntervalSeconds": 30}}


def _docs(namespace: str) -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": namespace},
            "data": {"k": "v"},
        },
    ]


def _deployed(plane: controlplane.ControlPlane, kube: rest.Rest, namespace: str, node: str) -> Any:
    return localcluster.deployed(
        kube,
        plane,
        _docs(namespace),
        namespace=namespace,
        nodes=(node,),
        nodemetric_spec=SPEC,
        crds=CRDS,
        stall_timeout=60.0,
    )


def test_applies_seeds_and_removes_everything(cluster: controlplane.ControlPlane) -> None:
    """Inside: the manifests applied and the node's NodeMetric fresh with the spec; after: gone."""
    kube = rest.Rest.from_kubeconfig(cluster.kubeconfig, qps=0)
    namespace, node = f"t-{uuid.uuid4().hex[:8]}", f"n-{uuid.uuid4().hex[:8]}"
    metric = f"{localcluster.NODEMETRICS}/{node}"
    configmap = f"/api/v1/namespaces/{namespace}/configmaps/settings"
    with _deployed(cluster, kube, namespace, node):
        assert kube.get(configmap)["data"] == {"k": "v"}
        assert kube.get(metric)["spec"]["metricCollectPolicy"] == SPEC["metricCollectPolicy"]
    assert not localcluster.exists(kube, configmap)
    assert not localcluster.exists(kube, metric)


def test_a_failure_inside_still_removes_the_install(cluster: controlplane.ControlPlane) -> None:
    """An error in the scenario propagates, and the teardown has run regardless."""
    kube = rest.Rest.from_kubeconfig(cluster.kubeconfig, qps=0)
    namespace, node = f"t-{uuid.uuid4().hex[:8]}", f"n-{uuid.uuid4().hex[:8]}"
    with (
        pytest.raises(RuntimeError, match="scenario failed"),
        _deployed(cluster, kube, namespace, node),
    ):
        raise RuntimeError("scenario failed")
    assert not localcluster.exists(kube, f"/api/v1/namespaces/{namespace}/configmaps/settings")
    assert not localcluster.exists(kube, f"{localcluster.NODEMETRICS}/{node}")


def test_replaces_an_earlier_agents_nodemetric(cluster: controlplane.ControlPlane) -> None:
    """A NodeMetric an earlier agent left with another spec is replaced by the seeded one."""
    kube = rest.Rest.from_kubeconfig(cluster.kubeconfig, qps=0)
    namespace, node = f"t-{uuid.uuid4().hex[:8]}", f"n-{uuid.uuid4().hex[:8]}"
    metric = f"{localcluster.NODEMETRICS}/{node}"
    kube.create(
        localcluster.NODEMETRICS,
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeMetric",
            "metadata": {"name": node},
            "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}},
        },
    )
    with _deployed(cluster, kube, namespace, node):
        assert kube.get(metric)["spec"]["metricCollectPolicy"]["reportIntervalSeconds"] == 30
