"""Pods on the real nodes reach the API server as in a real cluster (issue 15,
groundwork for test 1): the kubelet sets KUBERNETES_SERVICE_HOST/PORT from the
`kubernetes` Service (10.0.0.1:443, routed by kube.servicenat), mounts a
projected ServiceAccount token and the `kube-root-ca.crt` CA, and nodeqos's
own client (`kube.rest.api_client()`, in-cluster config) authenticates with them."""

from __future__ import annotations

from typing import Any

import pytest

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
