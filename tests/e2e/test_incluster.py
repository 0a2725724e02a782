"""Pods on the real nodes reach the API server as in a real cluster (issue 15,
groundwork for test 1): the kubelet sets KUBERNETES_SERVICE_HOST/PORT from the
`kubernetes` Service (10.0.0.1:443, routed by testbed.servicenat), mounts a
projected ServiceAccount token and the `kube-root-ca.crt` CA, and nodeqos's
own client (`kube.rest.api_client()`, in-cluster config) authenticates with them."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from testbed import controlplane, localnodes, servicenat
from tests.e2e import pods
from tests.e2e.conftest import RealCluster

pytestmark = [pytest.mark.e2e, pytest.mark.controlplane, pytest.mark.slow]

# Exits 0 only if the API server, reached through the Service and verified
# against the mounted CA, knows the pod as its ServiceAccount.
WHO_AM_I = """
import os, sys
from kube import rest
host = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
api = rest.Rest(rest.api_client())
version = api.get("/version")
review = api.create(
    "/apis/authentication.k8s.io/v1/selfsubjectreviews",
    {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
)
user = review["status"]["userInfo"]["username"]
print(host, version["gitVersion"], user)
sys.exit(0 if user == "system:serviceaccount:" + sys.argv[1] + ":default" else 1)
"""


def whoami_pod(image: str, node: str, namespace: str) -> dict[str, Any]:
    return {
        "metadata": {"name": f"whoami-{node}"},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": ["python3", "-c", WHO_AM_I, namespace],
                    # The kubelet copies the log tail here: no logs API on these nodes.
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                }
            ],
        },
    }


def test_pods_reach_the_api_server_through_the_kubernetes_service(
    real_cluster: RealCluster, nodeqos_image: str, e2e_namespace: str
) -> None:
    """On every node a pod's in-cluster config authenticates as its ServiceAccount."""
    kube = real_cluster.kube
    ns_pods = f"/api/v1/namespaces/{e2e_namespace}/pods"
    for node in real_cluster.nodes:
        kube.create(ns_pods, whoami_pod(nodeqos_image, node, e2e_namespace))

    def finished() -> list[dict[str, Any]] | None:
        found = [kube.get(f"{ns_pods}/whoami-{node}") for node in real_cluster.nodes]
        done = all(p["status"].get("phase") in ("Succeeded", "Failed") for p in found)
        return found if done else None

    for p in pods.wait_for(finished, "the whoami pods to finish", timeout=120):
        (status,) = p["status"]["containerStatuses"]
        terminated = status["state"]["terminated"]
        assert p["status"]["phase"] == "Succeeded", (
            f"{p['metadata']['name']} on {p['spec']['nodeName']} could not use its in-cluster "
            f"config (exit {terminated['exitCode']}): {terminated.get('message')}"
        )


def test_service_route_is_installed_once_however_often_installed(
    real_cluster: RealCluster,
) -> None:
    """Installing the kubernetes Service route again replaces it: one rule, one jump per hook."""
    plane = real_cluster.plane
    target = localnodes.node_ip(plane, "n1")
    servicenat.install(controlplane.KUBERNETES_SERVICE_IP, target, plane.secure_port)

    def saved(*args: str) -> list[str]:
        done = subprocess.run(
            ["iptables", "-w", "-t", "nat", "-S", *args], capture_output=True, text=True, check=True
        )
        return done.stdout.splitlines()

    assert saved(servicenat.CHAIN)[1:] == [
        f"-A {servicenat.CHAIN} -d {controlplane.KUBERNETES_SERVICE_IP}/32 -p tcp -m tcp "
        '--dport 443 -m comment --comment "nodeqos: default/kubernetes:https" '
        f"-j DNAT --to-destination {target}:{plane.secure_port}"
    ]
    for hook in servicenat.HOOKS:
        assert saved(hook).count(f"-A {hook} -j {servicenat.CHAIN}") == 1, saved(hook)
