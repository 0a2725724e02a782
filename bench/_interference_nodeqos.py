"""nodeqos on the interference bench's node: installed from deploy/, switched, removed.

`install` applies deploy/ as `testbed.placementloop.one_host_manifests` does
(the image in place of the placeholder, the agent's cgroup root and cache dir
for a node sharing the host), leaving out the descheduler and the scheduler
extender (kube-scheduler alone places here), with this overlay:

- the agent measures the node as its kubelet's pods (`--node-usage-source=kubepods`:
  the host's /proc is shared with the control plane on CPU 0) and takes its
  `--feature-gates` from one value (`BE_CPU_IDLE_GATES` for the cpu.idle arm);
- `colocation-config` on, reporting every 30 s (the agent's minimum) over 20 s, the
  reclaim threshold `THRESHOLD_PERCENT` of capacity (Koordinator's 65 % of the pods'
  CPU; see `_interference_cluster`);
- `resource-threshold-config`: BE suppression on at the same threshold, by
  `cfsQuota` or `cpuset`;
- a ClusterColocationProfile making the `role=batch` pods of namespaces labelled
  `colocation=on` BE with Koordinator's `koord-batch` PriorityClass.

`remove` deletes all of it and undoes what the agent leaves on the BE QoS cgroup.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench import _interference_cluster as cluster
from kube import rest
from testbed import localcluster, placementloop, placementwatch

BE_CPU_IDLE_GATE = "BECPUIdle"
BE_CPU_IDLE_GATES = f"{BE_CPU_IDLE_GATE}=true"  # the cpu.idle arm's agent --feature-gates
CFS_QUOTA, CPUSET = "cfsQuota", "cpuset"
REPORT_SECONDS, WINDOW_SECONDS = 30, 20
AGENTS = "app.kubernetes.io/name=nodeqos-agent"
MANAGERS = "app.kubernetes.io/name=nodeqos-manager"


def gate_available() -> bool:
    """Whether this checkout's agent knows the BE cpu.idle gate (the image is built
    from the same tree)."""
    from qosmanager import features

    return any(f.name == BE_CPU_IDLE_GATE for f in features.BUILTIN_FEATURES)


def colocation_config() -> dict[str, Any]:
    return {
        "enable": True,
        "cpuReclaimThresholdPercent": cluster.THRESHOLD_PERCENT,
        "memoryReclaimThresholdPercent": 65,
        "degradeTimeMinutes": 5,
        "updateTimeThresholdSeconds": REPORT_SECONDS,
        "resourceDiffThreshold": 0.1,
        "metricAggregateDurationSeconds": WINDOW_SECONDS,
        "metricReportIntervalSeconds": REPORT_SECONDS,
        "metricAggregatePolicy": {"durations": ["1m", "5m"]},
        "metricMemoryCollectPolicy": "usageWithoutPageCache",
    }


def threshold_config(policy: str) -> dict[str, Any]:
    return {
        "clusterStrategy": {
            "enable": True,
            "cpuSuppressThresholdPercent": cluster.THRESHOLD_PERCENT,
            "cpuSuppressPolicy": policy,
            "memoryEvictThresholdPercent": 90,
        }
    }


def manifests(image: str, state_dir: Path, *, policy: str, gates: str) -> list[dict[str, Any]]:
    docs = []
    for doc in placementloop.one_host_manifests(image, state_dir):
        name = doc["metadata"]["name"]
        if doc["kind"] == "Deployment" and name != "nodeqos-manager":
            continue
        if doc["kind"] == "Service" and "extender" in name:
            continue
        if doc["kind"] == "DaemonSet":
            (agent,) = doc["spec"]["template"]["spec"]["containers"]
            agent["args"] = agent_args(agent["args"], gates)
        elif doc["kind"] == "Deployment":
            doc["spec"]["replicas"] = 1
        elif doc["kind"] == "ConfigMap" and name == "slo-controller-config":
            doc["data"]["colocation-config"] = json.dumps(colocation_config(), indent=2)
            doc["data"]["resource-threshold-config"] = json.dumps(threshold_config(policy))
        docs.append(doc)
    return docs


def agent_args(args: list[str], gates: str) -> list[str]:
    kept = [a for a in args if not a.startswith(("--feature-gates=", "--node-usage-source="))]
    return [*kept, "--node-usage-source=kubepods", *([f"--feature-gates={gates}"] if gates else [])]


def profile() -> dict[str, Any]:
    return {
        "apiVersion": "config.koordinator.sh/v1alpha1",
        "kind": "ClusterColocationProfile",
        "metadata": {"name": cluster.PROFILE},
        "spec": {
            "namespaceSelector": {"matchLabels": {"colocation": "on"}},
            "selector": {"matchLabels": {"role": "batch"}},
            "qosClass": "BE",
            "priorityClassName": cluster.PRIORITY_CLASS,
        },
    }


def _policy_binding() -> str:
    return rest.object_path(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingadmissionpolicybindings",
        f"nodeqos-colocation-{cluster.PROFILE}",
    )


def _ready(kube: rest.Rest, selector: str) -> list[dict[str, Any]]:
    return [
        p
        for p in placementwatch.pods(kube, cluster.SYSTEM_NAMESPACE, selector)
        if placementwatch.ready(p)
    ]


def install(
    kube: rest.Rest, plane: Any, image: str, state_dir: Path, *, policy: str, gates: str
) -> None:
    """nodeqos running on the node, the profile rendered, batch-cpu room for the batch pods."""
    localcluster.wait_for(
        lambda: not cluster.exists(kube, f"/api/v1/namespaces/{cluster.SYSTEM_NAMESPACE}"),
        f"namespace {cluster.SYSTEM_NAMESPACE} from the last install gone",
        timeout=180,
    )
    cluster.delete(kube, f"{cluster.NODEMETRICS}/{cluster.NODE}")
    kube.create(
        cluster.NODEMETRICS,
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeMetric",
            "metadata": {"name": cluster.NODE},
            "spec": placementloop.NODEMETRIC_SPEC,
        },
    )
    plane.install_crds(placementloop.DEPLOY / "crds")
    for doc in manifests(image, state_dir, policy=policy, gates=gates):
        localcluster.apply(kube, doc)
        if doc["kind"] == "Namespace":
            localcluster.wait_namespace_ready(kube, doc["metadata"]["name"])
    cluster.delete(kube, f"{cluster.PRIORITY_CLASSES}/{cluster.PRIORITY_CLASS}")
    kube.create(
        cluster.PRIORITY_CLASSES,
        {"metadata": {"name": cluster.PRIORITY_CLASS}, "value": 5000, "preemptionPolicy": "Never"},
    )
    kube.create(cluster.PROFILES, profile())
    cluster.wait_for(lambda: _ready(kube, AGENTS), "a Ready nodeqos-agent", timeout=300)
    cluster.wait_for(lambda: _ready(kube, MANAGERS), "a Ready nodeqos-manager", timeout=300)
    cluster.wait_for(
        lambda: cluster.exists(kube, _policy_binding()), "the profile rendered", timeout=120
    )
    cluster.wait_for(
        lambda: profile_active(kube), "the API server applying the profile", timeout=60
    )
    wait_batch_room(kube)


def profile_active(kube: rest.Rest) -> bool:
    """A batch pod created now would be made BE asking batch-cpu (a dry run: admission
    runs, nothing is stored). The binding existing is not enough: the API server loads
    policies asynchronously."""
    path = f"/api/v1/namespaces/{cluster.BATCH_NAMESPACE}/pods"
    pod = kube.request("POST", path, query={"dryRun": "All"}, body=cluster.batch_pod(0, batch=True))
    requests = pod["spec"]["containers"][0].get("resources", {}).get("requests", {})
    return cluster.BATCH_CPU in requests


def wait_batch_room(kube: rest.Rest) -> int:
    """batch-cpu published with room for every batch pod's request."""
    need = cluster.BATCH_PODS * cluster.BATCH_REQUEST_MILLIS
    room: int = cluster.wait_for(
        lambda: (value := cluster.batch_cpu(kube)) is not None and value >= need and value,
        f"batch-cpu >= {need}m on {cluster.NODE}",
        timeout=4 * REPORT_SECONDS + 60,
        interval=1.0,
    )
    return room


def set_policy(kube: rest.Rest, policy: str) -> None:
    kube.patch(
        cluster.SLO_CONFIG,
        {"data": {"resource-threshold-config": json.dumps(threshold_config(policy))}},
    )


def set_gates(kube: rest.Rest, gates: str, *, timeout: float = 300.0) -> None:
    """The agent restarted with `gates`; returns once the new agent pod is Ready."""
    daemonset = kube.get(cluster.DAEMONSET)
    (agent,) = daemonset["spec"]["template"]["spec"]["containers"]
    wanted = agent_args(agent["args"], gates)
    if wanted == agent["args"]:
        return
    agent["args"] = wanted
    old = {
        p["metadata"]["uid"] for p in placementwatch.pods(kube, cluster.SYSTEM_NAMESPACE, AGENTS)
    }
    kube.replace(cluster.DAEMONSET, daemonset)
    cluster.wait_for(
        lambda: (
            [p for p in _ready(kube, AGENTS) if p["metadata"]["uid"] not in old]
            and not any(
                p["metadata"]["uid"] in old
                for p in placementwatch.pods(kube, cluster.SYSTEM_NAMESPACE, AGENTS)
            )
        ),
        f"the agent restarted with --feature-gates={gates}",
        timeout=timeout,
    )


def remove(kube: rest.Rest, image: str, state_dir: Path) -> None:
    """Everything `install` made gone; the BE QoS cgroup as the kubelet made it."""
    cluster.delete(kube, f"{cluster.PROFILES}/{cluster.PROFILE}")
    cluster.delete(kube, f"{cluster.PRIORITY_CLASSES}/{cluster.PRIORITY_CLASS}")
    for doc in reversed(manifests(image, state_dir, policy=CFS_QUOTA, gates="")):
        _delete_doc(kube, doc)
    cluster.delete(kube, _policy_binding())
    cluster.delete(
        kube,
        rest.object_path(
            "admissionregistration.k8s.io",
            "v1",
            "mutatingadmissionpolicies",
            f"nodeqos-colocation-{cluster.PROFILE}",
        ),
    )
    cluster.wait_for(
        lambda: not cluster.exists(kube, f"/api/v1/namespaces/{cluster.SYSTEM_NAMESPACE}"),
        f"namespace {cluster.SYSTEM_NAMESPACE} gone",
        timeout=180,
    )
    cluster.delete(kube, f"{cluster.NODEMETRICS}/{cluster.NODE}")
    kube.patch(
        f"/api/v1/nodes/{cluster.NODE}/status",
        {
            "status": {
                key: {cluster.BATCH_CPU: None, "kubernetes.io/batch-memory": None}
                for key in ("capacity", "allocatable")
            }
        },
    )
    cluster.reset_besteffort()


def _delete_doc(kube: rest.Rest, doc: Mapping[str, Any]) -> None:
    group, version, plural, namespaced = localcluster.MANIFEST_KINDS[doc["kind"]]
    meta = doc["metadata"]
    ns = meta.get("namespace") if namespaced else None
    cluster.delete(kube, rest.object_path(group, version, plural, meta["name"], namespace=ns))
