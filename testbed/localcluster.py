"""The parts of a cluster that the local control plane does not run, played by hand.

Only etcd and kube-apiserver run locally: no scheduler, controller-manager or
kubelet. Tests and the demo use these helpers to do, explicitly and
deterministically, what those components would:

- register a Node with allocatable and a Ready condition (kubelet);
- bind a pod and report it Running and Ready (scheduler + kubelet); the Eviction
  API only consults PodDisruptionBudgets for running pods;
- compute a PodDisruptionBudget's status (the disruption controller); the
  Eviction API answers 429 until `observedGeneration` catches up;
- finish graceful deletions (kubelet), else evicted pods stay Terminating.

The real-node scenarios (`testbed.placementloop`, `testbed.colocationloop`) share
the skeleton of an install here: `deployed` waits out an earlier install, seeds
the NodeMetrics, installs the CRDs, applies the manifests and removes it all on exit;
`wait_for` and `wait_namespace_ready` are their bounded waits.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from kube import rest, selectors
from testbed import controlplane

PODS = "/api/v1/namespaces/{ns}/pods"


def exists(kube: rest.Rest, path: str) -> bool:
    """Whether the object at `path` exists (any other API error raises)."""
    try:
        kube.get(path)
    except rest.ApiError as err:
        if err.not_found:
            return False
        raise
    return True


def delete_path(kube: rest.Rest, path: str) -> None:
    """Delete the object at `path`; one already gone is fine."""
    try:
        kube.delete(path)
    except rest.ApiError as err:
        if not err.not_found:
            raise


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def register_node(
    client: rest.Rest,
    name: str,
    *,
    cpu: str = "4",
    memory: str = "16Gi",
    pods: str = "110",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    ready: bool = True,
) -> dict[str, Any]:
    """Create (or update) a Node and report its status like a kubelet would.

    The API server's TaintNodesByCondition admission taints every new Node
    `node.kubernetes.io/not-ready:NoSchedule`, and the node lifecycle controller
    that lifts it once the node is Ready does not run here; a Ready node
    therefore gets exactly `taints` back, a not-ready one keeps the taint.
    """
    resources = {"cpu": cpu, "memory": memory, "pods": pods}
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, **(labels or {})},
            "annotations": dict(annotations or {}),
        },
        "spec": {"taints": taints or [], "unschedulable": unschedulable},
    }
    path = rest.object_path("", "v1", "nodes", name)
    try:
        client.create(rest.object_path("", "v1", "nodes"), body)
    except rest.ApiError as err:
        if not err.conflict:
            raise
        client.patch(path, {"metadata": body["metadata"], "spec": body["spec"]})
    else:
        if ready:  # what the node lifecycle controller would do (see above)
            client.patch(path, {"spec": {"taints": body["spec"]["taints"]}})
    status = {
        "capacity": resources,
        "allocatable": resources,
        "conditions": [
            {
                "type": "Ready",
                "status": "True" if ready else "False",
                "reason": "KubeletReady" if ready else "KubeletNotReady",
                "lastHeartbeatTime": now_rfc3339(),
                "lastTransitionTime": now_rfc3339(),
            }
        ],
    }
    return dict(client.patch(path + "/status", {"status": status}))


def mark_running(
    client: rest.Rest, pod: Mapping[str, Any], *, ready: bool = True
) -> dict[str, Any]:
    """Report a bound pod Running (and Ready), with container IDs, like its kubelet."""
    meta = pod["metadata"]
    containers = pod["spec"]["containers"]
    uid = str(meta.get("uid", ""))
    status = {
        "phase": "Running",
        "startTime": now_rfc3339(),
        "conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": "True" if ready else "False"},
            {"type": "ContainersReady", "status": "True" if ready else "False"},
        ],
        "containerStatuses": [
            {
                "name": c["name"],
                "ready": ready,
                "restartCount": 0,
                "image": c.get("image", "busybox"),
                "imageID": "",
                "containerID": f"containerd://{uid.replace('-', '')[:24]}{i:040d}"[:77],
                "started": True,
                "state": {"running": {"startedAt": now_rfc3339()}},
            }
            for i, c in enumerate(containers)
        ],
    }
    path = rest.object_path(
        "", "v1", "pods", meta["name"], namespace=meta["namespace"], subresource="status"
    )
    return dict(client.patch(path, {"status": status}))


def bind(client: rest.Rest, namespace: str, name: str, node: str) -> None:
    """Bind an unscheduled pod to a node through the binding subresource (the scheduler's way)."""
    client.create(
        rest.object_path("", "v1", "pods", name, namespace=namespace, subresource="binding"),
        {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        },
    )


def _pod_ready(pod: Mapping[str, Any]) -> bool:
    if pod.get("metadata", {}).get("deletionTimestamp"):
        return False
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _resolve(value: int | str, total: int, *, round_up: bool) -> int:
    if isinstance(value, int):
        return value
    fraction = int(value.rstrip("%")) * total / 100
    return math.ceil(fraction) if round_up else math.floor(fraction)


def sync_pdb_status(client: rest.Rest, namespace: str, name: str) -> dict[str, Any]:
    """Compute a PDB's status from its pods, as the disruption controller does."""
    path = rest.object_path("policy", "v1", "poddisruptionbudgets", name, namespace=namespace)
    pdb = client.get(path)
    spec = pdb["spec"]
    pods = client.get(PODS.format(ns=namespace))["items"]
    selector = selectors.LabelSelector.from_api(spec.get("selector"))
    matching = [p for p in pods if selector.matches(p["metadata"].get("labels") or {})]
    expected = len(matching)
    healthy = sum(1 for p in matching if _pod_ready(p))
    if "minAvailable" in spec:
        desired = _resolve(spec["minAvailable"], expected, round_up=True)
    else:
        desired = expected - _resolve(spec.get("maxUnavailable", 0), expected, round_up=True)
    status = {
        "observedGeneration": pdb["metadata"]["generation"],
        "expectedPods": expected,
        "currentHealthy": healthy,
        "desiredHealthy": max(0, desired),
        "disruptionsAllowed": max(0, healthy - desired),
        "disruptedPods": {},
        "conditions": [
            {
                "type": "DisruptionAllowed",
                "status": "True" if healthy > desired else "False",
                "reason": "SufficientPods" if healthy > desired else "InsufficientPods",
                "message": "",
                "observedGeneration": pdb["metadata"]["generation"],
                "lastTransitionTime": now_rfc3339(),
            }
        ],
    }
    pdb["status"] = status
    return dict(client.replace(path + "/status", pdb))


def finish_terminating(client: rest.Rest, namespace: str | None = None) -> list[str]:
    """Delete with grace 0 every pod that has a deletionTimestamp (the kubelet's last step)."""
    path = PODS.format(ns=namespace) if namespace else "/api/v1/pods"
    finished = []
    for pod in client.get(path)["items"]:
        meta = pod["metadata"]
        if not meta.get("deletionTimestamp"):
            continue
        try:
            client.delete(
                rest.object_path("", "v1", "pods", meta["name"], namespace=meta["namespace"]),
                {
                    "apiVersion": "v1",
                    "kind": "DeleteOptions",
                    "gracePeriodSeconds": 0,
                    "preconditions": {"uid": meta["uid"]},
                },
            )
        except rest.ApiError as err:
            if not (err.not_found or err.conflict):
                raise
        finished.append(f"{meta['namespace']}/{meta['name']}")
    return finished


# kind -> (group, version, plural, namespaced): what deploy/*.yaml holds
MANIFEST_KINDS: dict[str, tuple[str, str, str, bool]] = {
    "Namespace": ("", "v1", "namespaces", False),
    "ServiceAccount": ("", "v1", "serviceaccounts", True),
    "ConfigMap": ("", "v1", "configmaps", True),
    "Service": ("", "v1", "services", True),
    "ClusterRole": ("rbac.authorization.k8s.io", "v1", "clusterroles", False),
    "ClusterRoleBinding": ("rbac.authorization.k8s.io", "v1", "clusterrolebindings", False),
    "Role": ("rbac.authorization.k8s.io", "v1", "roles", True),
    "RoleBinding": ("rbac.authorization.k8s.io", "v1", "rolebindings", True),
    "ValidatingAdmissionPolicy": (
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicies",
        False,
    ),
    "ValidatingAdmissionPolicyBinding": (
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicybindings",
        False,
    ),
    "DaemonSet": ("apps", "v1", "daemonsets", True),
    "Deployment": ("apps", "v1", "deployments", True),
    "PodDisruptionBudget": ("policy", "v1", "poddisruptionbudgets", True),
}


def apply(client: rest.Rest, doc: Mapping[str, Any], *, dry_run: bool = False) -> None:
    """Create one manifest object (like `kubectl create`); an existing one is left as is."""
    try:
        group, version, plural, namespaced = MANIFEST_KINDS[doc["kind"]]
    except KeyError:
        raise ValueError(
            f"cannot apply kind {doc.get('kind')!r}; known: {sorted(MANIFEST_KINDS)}"
        ) from None
    namespace = doc["metadata"].get("namespace") if namespaced else None
    path = rest.object_path(group, version, plural, namespace=namespace)
    try:
        client.request("POST", path, query={"dryRun": "All"} if dry_run else {}, body=dict(doc))
    except rest.ApiError as err:
        if not err.conflict:
            raise


def wait_drained(
    remaining: Callable[[], int],
    what: str,
    *,
    stall_timeout: float,
    interval: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
) -> None:
    """Wait until `remaining()` (objects still terminating) is 0, as long as it progresses.

    A busy machine can take minutes to stop many pods, so there is no fixed total
    deadline: each drop of the count restarts the `stall_timeout` s one. A count that
    stays up (or grows) that long is stuck, and TimeoutError names `what` and the count.
    """
    left = remaining()
    progressed = clock()
    while left:
        if clock() - progressed > stall_timeout:
            raise TimeoutError(f"{what}: {left} still there, no progress in {stall_timeout:.0f}s")
        sleep(interval)
        now_left = remaining()
        if now_left < left:
            progressed = clock()
        left = now_left


def wait_for(check: Callable[[], Any], what: str, *, timeout: float, interval: float = 1.0) -> Any:
    """`check()` once it is truthy; TimeoutError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def wait_namespace_ready(kube: rest.Rest, namespace: str, timeout: float = 60.0) -> None:
    """The controllers' `default` ServiceAccount and `kube-root-ca.crt` exist (pods need them)."""
    for path in (
        f"/api/v1/namespaces/{namespace}/serviceaccounts/default",
        f"/api/v1/namespaces/{namespace}/configmaps/kube-root-ca.crt",
    ):
        wait_for(functools.partial(exists, kube, path), path, timeout=timeout, interval=0.2)


def delete_doc(kube: rest.Rest, doc: Mapping[str, Any]) -> None:
    """Delete the object a manifest created (`apply`'s counterpart); one already gone is fine."""
    group, version, plural, namespaced = MANIFEST_KINDS[doc["kind"]]
    meta = doc["metadata"]
    namespace = meta.get("namespace") if namespaced else None
    delete_path(kube, rest.object_path(group, version, plural, meta["name"], namespace=namespace))


NODEMETRICS = rest.object_path("slo.koordinator.sh", "v1alpha1", "nodemetrics")


def seed_nodemetrics(kube: rest.Rest, nodes: Sequence[str], spec: Mapping[str, Any]) -> None:
    """A fresh NodeMetric with `spec` for each node (an earlier agent's, default spec, replaced)."""
    for node in nodes:
        delete_path(kube, f"{NODEMETRICS}/{node}")
        kube.create(
            NODEMETRICS,
            {
                "apiVersion": "slo.koordinator.sh/v1alpha1",
                "kind": "NodeMetric",
                "metadata": {"name": node},
                "spec": dict(spec),
            },
        )


@contextlib.contextmanager
def deployed(
    kube: rest.Rest,
    plane: controlplane.ControlPlane,
    docs: Sequence[Mapping[str, Any]],
    *,
    namespace: str,
    nodes: Sequence[str],
    nodemetric_spec: Mapping[str, Any],
    crds: Path,
    stall_timeout: float,
) -> Iterator[None]:
    """nodeqos's manifests `docs` applied, their system `namespace` ready, each node's
    NodeMetric seeded with `nodemetric_spec`; all of it removed again on exit.

    First waits (while it progresses, `stall_timeout`) for an earlier install's
    `namespace` to be gone. On exit the objects go in reverse order and the pods of
    `namespace` get one more bounded wait (the next install waits for the rest).
    """

    def left() -> int:
        if not exists(kube, f"/api/v1/namespaces/{namespace}"):
            return 0
        return 1 + len(kube.get(PODS.format(ns=namespace))["items"])

    wait_drained(
        left,
        f"namespace {namespace} from an earlier install to be gone",
        stall_timeout=stall_timeout,
    )
    seed_nodemetrics(kube, nodes, nodemetric_spec)
    plane.install_crds(crds)
    try:
        for doc in docs:
            apply(kube, doc)
            if doc["kind"] == "Namespace":
                wait_namespace_ready(kube, doc["metadata"]["name"])
        yield
    finally:
        for doc in reversed(docs):
            delete_doc(kube, doc)
        with contextlib.suppress(TimeoutError):
            wait_drained(
                lambda: len(kube.get(PODS.format(ns=namespace))["items"]),
                f"the pods of {namespace} to be gone",
                stall_timeout=stall_timeout,
            )
        for node in nodes:
            delete_path(kube, f"{NODEMETRICS}/{node}")
