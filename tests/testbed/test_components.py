"""The real kube-controller-manager and kube-scheduler run on the local control plane."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any, TypeVar

import pytest

from kube import rest
from testbed import components, controlplane, localcluster
from tests.waiting import eventually

pytestmark = pytest.mark.controlplane

T = TypeVar("T")


@pytest.fixture(scope="module")
def admin(cluster: controlplane.ControlPlane) -> rest.Rest:
    return rest.Rest.from_kubeconfig(cluster.kubeconfig, qps=0)


@pytest.fixture
def ns(admin: rest.Rest) -> Iterator[str]:
    name = f"c-{uuid.uuid4().hex[:8]}"
    admin.create("/api/v1/namespaces", {"metadata": {"name": name}})
    yield name
    admin.delete(f"/api/v1/namespaces/{name}")


def deployment(name: str, replicas: int, *, cpu: str = "100m", **pod_spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "resources": {"requests": {"cpu": cpu}},
                        }
                    ],
                    **pod_spec,
                },
            },
        },
    }


def pods(admin: rest.Rest, ns: str, app: str) -> list[dict[str, Any]]:
    found = admin.get(f"/api/v1/namespaces/{ns}/pods", query={"labelSelector": f"app={app}"})
    return list(found["items"])


def test_deployment_controller_creates_replicaset_and_pods(admin: rest.Rest, ns: str) -> None:
    """A Deployment of 3 becomes a ReplicaSet owning 3 pods, made by the real controllers."""
    admin.create(f"/apis/apps/v1/namespaces/{ns}/deployments", deployment("web", 3))
    made = eventually(
        lambda: (p := pods(admin, ns, "web")) and len(p) == 3 and p,
        timeout=60,
        what="3 pods of web",
    )
    owners = {ref["kind"] for pod in made for ref in pod["metadata"]["ownerReferences"]}
    assert owners == {"ReplicaSet"}
    replicasets = admin.get(f"/apis/apps/v1/namespaces/{ns}/replicasets")["items"]
    assert [rs["metadata"]["ownerReferences"][0]["kind"] for rs in replicasets] == ["Deployment"]


def test_controllers_run_under_their_own_service_accounts(admin: rest.Rest) -> None:
    """--use-service-account-credentials: each controller has a ServiceAccount in kube-system."""
    names = {
        sa["metadata"]["name"]
        for sa in admin.get("/api/v1/namespaces/kube-system/serviceaccounts")["items"]
    }
    assert {"replicaset-controller", "deployment-controller", "disruption-controller"} <= names


def test_scheduler_binds_to_the_only_fitting_node(
    cluster: controlplane.ControlPlane, admin: rest.Rest, ns: str
) -> None:
    """The real scheduler binds a pod to the one node with room, and reports FailedScheduling otherwise."""
    suffix = ns[2:]
    small, big = f"small-{suffix}", f"big-{suffix}"
    localcluster.register_node(admin, small, cpu="500m")
    localcluster.register_node(admin, big, cpu="64")
    try:
        body = deployment("fit", 1, cpu="8", nodeSelector={"kubernetes.io/hostname": big})
        admin.create(f"/apis/apps/v1/namespaces/{ns}/deployments", body)
        bound = eventually(
            lambda: [p for p in pods(admin, ns, "fit") if p["spec"].get("nodeName")],
            timeout=60,
            what="the pod to be bound",
        )
        assert bound[0]["spec"]["nodeName"] == big

        body = deployment("nofit", 1, cpu="9999", nodeSelector={"kubernetes.io/hostname": small})
        admin.create(f"/apis/apps/v1/namespaces/{ns}/deployments", body)

        def failed() -> list[dict[str, Any]]:
            events = admin.get(f"/api/v1/namespaces/{ns}/events")["items"]
            return [e for e in events if e["reason"] == "FailedScheduling"]

        event = eventually(failed, timeout=60, what="a FailedScheduling event")[0]
        assert "Insufficient cpu" in event["message"] or "didn't match" in event["message"]
    finally:
        for node in (small, big):
            admin.delete(f"/api/v1/nodes/{node}")


def test_disruption_controller_computes_pdb_status(admin: rest.Rest, ns: str) -> None:
    """PDB status comes from the real disruption controller: Ready pods count, Eviction answers 429."""
    node = f"pdb-{ns[2:]}"
    localcluster.register_node(admin, node, cpu="8")
    try:
        admin.create(
            f"/apis/apps/v1/namespaces/{ns}/deployments",
            deployment("guarded", 2, nodeSelector={"kubernetes.io/hostname": node}),
        )
        admin.create(
            f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
            {
                "metadata": {"name": "guarded"},
                "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "guarded"}}},
            },
        )
        bound = eventually(
            lambda: (
                (p := [x for x in pods(admin, ns, "guarded") if x["spec"].get("nodeName")])
                and len(p) == 2
                and p
            ),
            timeout=60,
            what="2 bound pods",
        )
        for pod in bound:  # the kubelet's part: report them Running and Ready
            localcluster.mark_running(admin, pod)

        def status() -> dict[str, Any] | None:
            pdb = admin.get(f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/guarded")
            found = pdb.get("status") or {}
            return found if found.get("currentHealthy") == 2 else None

        computed = eventually(
            status, timeout=60, what="the disruption controller to count 2 healthy pods"
        )
        assert computed["expectedPods"] == 2
        assert computed["disruptionsAllowed"] == 0
        name = bound[0]["metadata"]["name"]
        with pytest.raises(rest.ApiError) as refused:
            admin.create(
                f"/api/v1/namespaces/{ns}/pods/{name}/eviction",
                {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}},
            )
        assert refused.value.status == 429
    finally:
        admin.delete(f"/api/v1/nodes/{node}")


def test_scheduler_config_keeps_profiles_and_sets_our_connection(tmp_path: Any) -> None:
    """A shipped KubeSchedulerConfiguration keeps its profiles; connection and election are ours."""
    shipped = {
        "apiVersion": components.SCHEDULER_CONFIG_API,
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": True},
        "profiles": [{"schedulerName": "nodeqos-load-aware"}],
    }
    config = components.scheduler_config(tmp_path / "k.kubeconfig", shipped)
    assert config["profiles"] == shipped["profiles"]
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["clientConnection"]["kubeconfig"] == str(tmp_path / "k.kubeconfig")
    with pytest.raises(ValueError, match="KubeSchedulerConfiguration"):
        components.scheduler_config(tmp_path / "k", {"kind": "Pod"})
