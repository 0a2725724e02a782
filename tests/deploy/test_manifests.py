"""deploy/ manifests against the real API server: they apply, and RBAC is least privilege."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kube import rest

pytestmark = pytest.mark.controlplane

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"

# kind -> (group, version, plural, namespaced)
KINDS: dict[str, tuple[str, str, str, bool]] = {
    "Namespace": ("", "v1", "namespaces", False),
    "ServiceAccount": ("", "v1", "serviceaccounts", True),
    "ConfigMap": ("", "v1", "configmaps", True),
    "Service": ("", "v1", "services", True),
    "ClusterRole": ("rbac.authorization.k8s.io", "v1", "clusterroles", False),
    "ClusterRoleBinding": ("rbac.authorization.k8s.io", "v1", "clusterrolebindings", False),
    "Role": ("rbac.authorization.k8s.io", "v1", "roles", True),
    "RoleBinding": ("rbac.authorization.k8s.io", "v1", "rolebindings", True),
    "DaemonSet": ("apps", "v1", "daemonsets", True),
    "Deployment": ("apps", "v1", "deployments", True),
    "PodDisruptionBudget": ("policy", "v1", "poddisruptionbudgets", True),
}


def documents() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                found.append((path.name, doc))
    return found


def apply(kube: rest.Rest, doc: dict[str, Any], *, dry_run: bool) -> None:
    group, version, plural, namespaced = KINDS[doc["kind"]]
    namespace = doc["metadata"].get("namespace") if namespaced else None
    path = rest.object_path(group, version, plural, namespace=namespace)
    query = {"dryRun": "All"} if dry_run else {}
    try:
        kube.request("POST", path, query=query, body=doc)
    except rest.ApiError as err:
        if not err.conflict:
            raise


@pytest.fixture(scope="module")
def applied(kube: rest.Rest) -> list[tuple[str, dict[str, Any]]]:
    """Namespaces and RBAC for real (SubjectAccessReviews need them), the rest validated by dry-run."""
    docs = documents()
    for _, doc in docs:
        if doc["kind"] in (
            "Namespace",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
        ):
            apply(kube, doc, dry_run=False)
    return docs


def test_every_manifest_passes_server_side_dry_run(
    kube: rest.Rest, applied: list[tuple[str, dict[str, Any]]]
) -> None:
    """Each object in deploy/*.yaml is accepted by the API server (kubectl apply --dry-run=server)."""
    assert any(doc["kind"] == "DaemonSet" for _, doc in applied)
    for name, doc in applied:
        assert doc["kind"] in KINDS, f"{name}: add {doc['kind']} to KINDS"
        apply(kube, doc, dry_run=True)


def can(
    kube: rest.Rest,
    user: str,
    verb: str,
    resource: str,
    *,
    group: str = "",
    subresource: str = "",
    namespace: str = "default",
) -> bool:
    review = kube.create(
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user,
                "groups": ["system:serviceaccounts", "system:authenticated"],
                "resourceAttributes": {
                    "verb": verb,
                    "group": group,
                    "resource": resource,
                    "subresource": subresource,
                    "namespace": namespace,
                },
            },
        },
    )
    return bool(review["status"]["allowed"])


AGENT = "system:serviceaccount:nodeqos-system:nodeqos-agent"


@pytest.mark.parametrize(
    ("verb", "resource", "group", "subresource", "allowed"),
    [
        pytest.param(
            "update",
            "nodemetrics",
            "slo.koordinator.sh",
            "status",
            True,
            id="update-nodemetric-status",
        ),
        pytest.param(
            "create", "nodemetrics", "slo.koordinator.sh", "", True, id="create-nodemetric"
        ),
        pytest.param("watch", "nodeslos", "slo.koordinator.sh", "", True, id="watch-nodeslo"),
        pytest.param("create", "pods", "", "eviction", True, id="evict-pods"),
        pytest.param("list", "pods", "", "", True, id="list-pods"),
        pytest.param("create", "events", "", "", True, id="record-events"),
        pytest.param("get", "secrets", "", "", False, id="no-secrets"),
        pytest.param("delete", "nodes", "", "", False, id="no-node-deletes"),
        pytest.param("delete", "pods", "", "", False, id="no-pod-deletes"),
        pytest.param("update", "nodeslos", "slo.koordinator.sh", "", False, id="no-nodeslo-writes"),
    ],
)
def test_agent_rbac_is_least_privilege(
    kube: rest.Rest,
    applied: object,
    verb: str,
    resource: str,
    group: str,
    subresource: str,
    allowed: bool,
) -> None:
    """The agent's ServiceAccount may do exactly what it needs."""
    assert can(kube, AGENT, verb, resource, group=group, subresource=subresource) is allowed
