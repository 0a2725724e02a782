"""deploy/ installed as a user installs it, on the real nodes (issue 15, test 1):
the CRDs and every manifest through our applier (`kubectl apply -f deploy/crds/
-f deploy/` equivalent), with the locally built image in place of the
``NODEQOS_IMAGE`` placeholder. The agent DaemonSet runs in cluster mode on every
node, is Ready and publishes each node's NodeMetric; one descheduler replica
holds its Lease; the scheduler extender's replicas are Ready.

Two patches, both what a user of these nodes would write in a kustomize
overlay, because this machine runs three nodes on one host (the deploy/
defaults stay as they are for real nodes):

- ``--kubelet-cgroup-root=/nodeqos-$(NODE_NAME)``: each local kubelet has its
  own cgroupRoot (kube.localnodes), which the agent must be told;
- the metric cache's hostPath (``/var/lib/nodeqos``) would be one directory
  for all three agents on one host: it moves to a temporary dir with a
  per-node ``subPathExpr``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kube import localcluster, rest, slo
from tests.e2e import pods
from tests.e2e.conftest import RealCluster, wait_namespace_ready

pytestmark = [pytest.mark.e2e, pytest.mark.controlplane, pytest.mark.slow]

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
NAMESPACE = "nodeqos-system"
PLACEHOLDER = "NODEQOS_IMAGE"


def manifests(image: str, state_dir: Path) -> list[dict[str, Any]]:
    """deploy/*.yaml with the image substituted and the agent patched for this host."""
    docs = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            doc = copy.deepcopy(doc)
            if doc["kind"] in ("DaemonSet", "Deployment"):
                for container in doc["spec"]["template"]["spec"]["containers"]:
                    assert container["image"] == PLACEHOLDER, (path.name, container["image"])
                    container["image"] = image
            if doc["kind"] == "DaemonSet":
                patch_agent_for_one_host(doc, state_dir)
            docs.append(doc)
    return docs


def patch_agent_for_one_host(daemonset: dict[str, Any], state_dir: Path) -> None:
    spec = daemonset["spec"]["template"]["spec"]
    (agent,) = spec["containers"]
    agent["args"].append("--kubelet-cgroup-root=/nodeqos-$(NODE_NAME)")
    for mount in agent["volumeMounts"]:
        if mount["name"] == "state":
            mount["subPathExpr"] = "$(NODE_NAME)"
    for volume in spec["volumes"]:
        if volume["name"] == "state":
            volume["hostPath"]["path"] = str(state_dir)


def ready(pod: dict[str, Any]) -> bool:
    conditions = pod["status"].get("conditions", [])
    return pod["metadata"].get("deletionTimestamp") is None and any(
        c["type"] == "Ready" and c["status"] == "True" for c in conditions
    )


def describe(kube: rest.Rest) -> str:
    """The namespace's pods, for a failure message: phase, node, container states."""
    lines = []
    for p in kube.get(f"/api/v1/namespaces/{NAMESPACE}/pods")["items"]:
        states = {
            s["name"]: (s["ready"], s["restartCount"], s["state"])
            for s in p["status"].get("containerStatuses", [])
        }
        lines.append(
            f"{p['metadata']['name']} on {p['spec'].get('nodeName')}: "
            f"{p['status'].get('phase')} {states}"
        )
    return "\n".join(lines) or "(no pods)"


@pytest.fixture
def installed(
    real_cluster: RealCluster, nodeqos_image: str, tmp_path: Path
) -> Iterator[list[dict[str, Any]]]:
    """deploy/ applied; everything it made deleted afterwards (pods gone before return)."""
    kube = real_cluster.kube
    real_cluster.plane.install_crds(DEPLOY / "crds")
    docs = manifests(nodeqos_image, tmp_path / "state")
    try:
        for doc in docs:
            localcluster.apply(kube, doc)
            if doc["kind"] == "Namespace":
                wait_namespace_ready(kube, doc["metadata"]["name"])
        yield docs
    finally:
        for doc in reversed(docs):
            group, version, plural, namespaced = localcluster.MANIFEST_KINDS[doc["kind"]]
            meta = doc["metadata"]
            path = rest.object_path(
                group,
                version,
                plural,
                meta["name"],
                namespace=meta.get("namespace") if namespaced else None,
            )
            try:
                kube.delete(path)
            except rest.ApiError as err:
                if not err.not_found:
                    raise
        pods.wait_for(
            lambda: not kube.get(f"/api/v1/namespaces/{NAMESPACE}/pods")["items"],
            f"the pods of {NAMESPACE} to be gone",
            timeout=120,
        )


def test_deploy_manifests_run_on_real_nodes(
    real_cluster: RealCluster, installed: list[dict[str, Any]]
) -> None:
    """Agents Ready on every node and reporting; the descheduler leads; the extender is Ready."""
    kube = real_cluster.kube
    ns_pods = f"/api/v1/namespaces/{NAMESPACE}/pods"
    nodes = set(real_cluster.nodes)

    def agents() -> dict[str, dict[str, Any]] | None:
        found = {
            p["spec"]["nodeName"]: p
            for p in kube.get(ns_pods, labelSelector="app.kubernetes.io/name=nodeqos-agent")[
                "items"
            ]
            if ready(p)
        }
        return found if set(found) == nodes else None

    try:
        pods.wait_for(agents, "a Ready agent on every node", timeout=180)
    except AssertionError as err:
        raise AssertionError(f"{err}\n{describe(kube)}") from None

    def reported() -> dict[str, dict[str, Any]] | None:
        found = {}
        for name in nodes:
            try:
                metric = kube.get(f"/apis/{slo.API_VERSION}/nodemetrics/{name}")
            except rest.ApiError as err:
                if err.not_found:
                    return None
                raise
            status = metric.get("status") or {}
            usage = (status.get("nodeMetric") or {}).get("nodeUsage") or {}
            if not status.get("updateTime") or "cpu" not in usage.get("resources", {}):
                return None
            found[name] = status
        return found

    try:
        statuses = pods.wait_for(reported, "a NodeMetric with node usage per node", timeout=180)
    except AssertionError as err:
        raise AssertionError(f"{err}\n{describe(kube)}") from None
    for name, status in statuses.items():
        assert status["nodeMetric"]["nodeUsage"]["resources"]["memory"], (name, status)

    def leader() -> str | None:
        try:
            lease = kube.get(
                f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/nodeqos-descheduler"
            )
        except rest.ApiError as err:
            if err.not_found:
                return None
            raise
        holder: str | None = lease["spec"].get("holderIdentity")
        return holder

    try:
        holder = pods.wait_for(leader, "a descheduler replica holding the Lease", timeout=180)
    except AssertionError as err:
        raise AssertionError(f"{err}\n{describe(kube)}") from None
    deschedulers = kube.get(ns_pods, labelSelector="app.kubernetes.io/name=nodeqos-descheduler")
    names = {p["metadata"]["name"] for p in deschedulers["items"]}
    # The identity is <hostname>_<pid>_<random>, and a pod's hostname is its name.
    assert holder.split("_")[0] in names, (holder, names)

    def extenders() -> list[dict[str, Any]] | None:
        found = [
            p
            for p in kube.get(
                ns_pods, labelSelector="app.kubernetes.io/name=nodeqos-scheduler-extender"
            )["items"]
            if ready(p)
        ]
        return found if len(found) == 2 else None

    try:
        pods.wait_for(extenders, "both scheduler extender replicas Ready", timeout=180)
    except AssertionError as err:
        raise AssertionError(f"{err}\n{describe(kube)}") from None
