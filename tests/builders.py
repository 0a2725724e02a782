"""Builders for the API objects and models tests need, with keyword overrides.

Defaults follow SCENARIOS.md: nodes are Ready and schedulable with 4 CPUs
and 16Gi allocatable; pods run on "n1", request 100m / 128Mi, are owned by a
ReplicaSet, have priority 0 and no local storage. Every builder has a `*_dict`
form returning the raw API JSON (what the API server would send) and a model
form built from it, so tests exercise the same parsing the caches do:

    make_pod("p1", node="n2", cpu="400m", qos=KoordQOS.BE)
    make_node("n1", taints=["dedicated=db:NoSchedule"], ready=False)
    make_nodemetric("n1", node_cpu="3700m", pods={"p1": "1200m", "p2": 1000})
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from kube import classify, objects, quantity, slo
from kube.classify import KoordQOS, KubeQOS, PriorityClass

T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
NODE_CPU = "4"
NODE_MEMORY = "16Gi"
NODE_MEMORY_USAGE = quantity.memory_bytes(NODE_MEMORY) // 10  # "10% on every node"
BATCH_CPU = "kubernetes.io/batch-cpu"
BATCH_MEMORY = "kubernetes.io/batch-memory"

_OWNER_API_VERSIONS = {
    "ReplicaSet": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "Deployment": "apps/v1",
    "Job": "batch/v1",
    "Node": "v1",
}
# The Kubernetes shape a Koordinator QoS class is usually paired with.
_KUBE_SHAPE = {
    KoordQOS.LSE: KubeQOS.GUARANTEED,
    KoordQOS.LSR: KubeQOS.GUARANTEED,
    KoordQOS.LS: KubeQOS.BURSTABLE,
    KoordQOS.SYSTEM: KubeQOS.BURSTABLE,
    KoordQOS.NONE: KubeQOS.BURSTABLE,
}


def _uid(*parts: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "/".join(parts)))


def _time(when: datetime | None) -> str | None:
    return None if when is None else objects.format_time(when)


def _resources(cpu: str | None, memory: str | None, qos: KubeQOS | KoordQOS) -> dict[str, Any]:
    """Container `resources` giving the pod the requested QoS shape."""
    if qos is KoordQOS.BE:  # Koordinator BE pods ask for batch resources only
        batch = {}
        if cpu is not None:
            batch[BATCH_CPU] = str(quantity.cpu_millis(cpu))
        if memory is not None:
            batch[BATCH_MEMORY] = memory
        return {"requests": batch, "limits": dict(batch)} if batch else {}
    shape = _KUBE_SHAPE[qos] if isinstance(qos, KoordQOS) else qos
    amounts = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    if shape is KubeQOS.BEST_EFFORT or not amounts:
        return {}
    if shape is KubeQOS.GUARANTEED:
        return {"requests": amounts, "limits": dict(amounts)}
    return {"requests": amounts}


def make_pod_dict(
    name: str,
    *,
    namespace: str = "default",
    node: str | None = "n1",
    cpu: str | None = "100m",
    memory: str | None = "128Mi",
    qos: KubeQOS | KoordQOS = KubeQOS.BURSTABLE,
    owner: str | None = "ReplicaSet",
    owner_name: str | None = None,
    owner_controller: bool = True,
    priority: int | None = 0,
    priority_class_name: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    uid: str | None = None,
    phase: str = "Running",
    image: str = "registry.local/app:1",
    containers: list[dict[str, Any]] | None = None,
    init_containers: list[dict[str, Any]] | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    affinity: dict[str, Any] | None = None,
    topology_spread: list[dict[str, Any]] | None = None,
    local_storage: bool = False,
    pvc: bool = False,
    restarts: int = 0,
    ready: bool = True,
    container_statuses: list[dict[str, Any]] | None = None,
    created: datetime | None = T0,
    started: datetime | None = T0,
    deleting: datetime | None = None,
    resource_version: str = "1",
) -> dict[str, Any]:
    """A v1.Pod as the API server returns it. `qos` shapes the resources:
    a KubeQOS sets requests/limits to produce it; a KoordQOS also sets the
    `koordinator.sh/qosClass` label (BE uses batch-cpu/batch-memory, as
    Koordinator's colocated BE pods do). `owner_controller=False` leaves the
    owner reference without `controller: true`, as hand-written ones may be."""
    all_labels = dict(labels or {})
    if isinstance(qos, KoordQOS) and qos is not KoordQOS.NONE:
        all_labels.setdefault(classify.LABEL_QOS_CLASS, qos.value)
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid or _uid("pod", namespace, name),
        "resourceVersion": resource_version,
        "creationTimestamp": _time(created),
    }
    if all_labels:
        metadata["labels"] = all_labels
    if annotations:
        metadata["annotations"] = dict(annotations)
    if owner is not None:
        oname = owner_name or f"{name}-{owner.lower()}"
        metadata["ownerReferences"] = [
            {
                "apiVersion": _OWNER_API_VERSIONS.get(owner, "v1"),
                "kind": owner,
                "name": oname,
                "uid": _uid(owner, namespace, oname),
                "controller": owner_controller,
                "blockOwnerDeletion": owner_controller,
            }
        ]
    if deleting is not None:
        metadata["deletionTimestamp"] = _time(deleting)
    main = {"name": "main", "image": image, "resources": _resources(cpu, memory, qos)}
    spec: dict[str, Any] = {"containers": containers if containers is not None else [main]}
    if node:
        spec["nodeName"] = node
    if priority is not None:
        spec["priority"] = priority
    if priority_class_name:
        spec["priorityClassName"] = priority_class_name
    for key, value in (
        ("initContainers", init_containers),
        ("nodeSelector", node_selector),
        ("tolerations", tolerations),
        ("affinity", affinity),
        ("topologySpreadConstraints", topology_spread),
    ):
        if value:
            spec[key] = value
    volumes = []
    if local_storage:
        volumes.append({"name": "scratch", "emptyDir": {}})
    if pvc:
        volumes.append({"name": "data", "persistentVolumeClaim": {"claimName": f"{name}-data"}})
    if volumes:
        spec["volumes"] = volumes
    running = phase == "Running"
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": [{"type": "Ready", "status": "True" if running and ready else "False"}],
        "containerStatuses": container_statuses
        if container_statuses is not None
        else [
            {
                "name": c["name"],
                "image": c.get("image", image),
                "ready": running and ready,
                "restartCount": restarts,
                "state": {"running": {"startedAt": _time(started)}}
                if running
                else {"waiting": {"reason": "ContainerCreating"}},
            }
            for c in spec["containers"]
        ],
    }
    if started is not None and node:
        status["startTime"] = _time(started)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


def make_pod(name: str, **overrides: Any) -> objects.Pod:
    """`make_pod_dict` parsed into the `kube.objects.Pod` view."""
    return objects.Pod.from_api(make_pod_dict(name, **overrides))


def _taint(spec: str | Mapping[str, Any]) -> dict[str, Any]:
    """A taint from "key=value:Effect" / "key:Effect" shorthand, or a dict as is."""
    if not isinstance(spec, str):
        return dict(spec)
    key_value, _, effect = spec.rpartition(":")
    key, _, value = key_value.partition("=")
    taint = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return taint


def make_node_dict(
    name: str,
    *,
    cpu: str = NODE_CPU,
    memory: str = NODE_MEMORY,
    pods: str = "110",
    extra_allocatable: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    taints: Iterable[str | Mapping[str, Any]] = (),
    unschedulable: bool = False,
    ready: bool = True,
    uid: str | None = None,
    created: datetime | None = T0,
    resource_version: str = "1",
) -> dict[str, Any]:
    """A v1.Node as the API server returns it (capacity equals allocatable)."""
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods, **(extra_allocatable or {})}
    metadata: dict[str, Any] = {
        "name": name,
        "uid": uid or _uid("node", name),
        "resourceVersion": resource_version,
        "creationTimestamp": _time(created),
        "labels": {"kubernetes.io/hostname": name, **(labels or {})},
    }
    if annotations:
        metadata["annotations"] = dict(annotations)
    spec: dict[str, Any] = {}
    taint_list = [_taint(t) for t in taints]
    if taint_list:
        spec["taints"] = taint_list
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": metadata,
        "spec": spec,
        "status": {
            "allocatable": allocatable,
            "capacity": dict(allocatable),
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def make_node(name: str, **overrides: Any) -> objects.Node:
    """`make_node_dict` parsed into the `kube.objects.Node` view."""
    return objects.Node.from_api(make_node_dict(name, **overrides))


Amount = str | int  # a quantity string, or millicores (CPU) / bytes (memory)


def _millis(value: Amount) -> int:
    return value if isinstance(value, int) else quantity.cpu_millis(value)


def _bytes(value: Amount) -> int:
    return value if isinstance(value, int) else quantity.memory_bytes(value)


_METRIC_FIELDS = frozenset({"priority", "qos"})


def _pod_metric(key: str, usage: Amount | Mapping[str, Any]) -> slo.PodMetricInfo:
    namespace, _, name = key.rpartition("/")
    spec: Mapping[str, Any] = usage if isinstance(usage, Mapping) else {"cpu": usage}
    amounts = {"cpu": _millis(spec.get("cpu", 0)), "memory": _bytes(spec.get("memory", 0))}
    for resource, amount in spec.items():  # extended resources, as some agents report them
        if resource not in amounts and resource not in _METRIC_FIELDS:
            amounts[resource] = int(amount)
    return slo.PodMetricInfo(
        name=name,
        namespace=namespace or "default",
        pod_usage=quantity.Resources(amounts),
        priority=PriorityClass(spec.get("priority", PriorityClass.NONE)),
        qos=KoordQOS(spec.get("qos", KoordQOS.LS)),
    )


def make_nodemetric(
    node: str,
    *,
    node_cpu: Amount | None = None,
    node_memory: Amount = NODE_MEMORY_USAGE,
    pods: Mapping[str, Amount | Mapping[str, Any]] | None = None,
    system_cpu: Amount = 0,
    update_time: datetime | None = T0,
    aggregated: bool = True,
    durations: Iterable[timedelta] = slo.DEFAULT_AGGREGATE_DURATIONS,
) -> slo.NodeMetric:
    """A NodeMetric as an agent would report it.

    `pods` maps "name" or "namespace/name" to CPU usage, or to a mapping with
    `cpu`, `memory`, `priority`, `qos` and any other resource name (an integer). Node CPU defaults to the pods' sum plus
    `system_cpu`; system usage is node minus pods, floored at 0. With
    `aggregated`, every window's aggregations equal the instantaneous usage.
    """
    pods_metric = tuple(
        sorted((_pod_metric(k, v) for k, v in (pods or {}).items()), key=lambda p: p.key)
    )
    pod_total = quantity.Resources()
    for p in pods_metric:
        pod_total = pod_total + p.pod_usage
    cpu = _millis(node_cpu) if node_cpu is not None else pod_total.cpu + _millis(system_cpu)
    node_usage = quantity.Resources({"cpu": cpu, "memory": _bytes(node_memory)})
    system_usage = (node_usage - pod_total).clamp_min(0)
    windows = tuple(durations) if aggregated else ()

    def aggregate(usage: quantity.Resources) -> tuple[slo.AggregatedUsage, ...]:
        return tuple(
            slo.AggregatedUsage(d, dict.fromkeys(slo.AggregationType, usage)) for d in windows
        )

    return slo.NodeMetric(
        metadata=slo.ObjectMeta(node),
        spec=slo.NodeMetricSpec(collect_policy=slo.NodeMetricCollectPolicy.defaults()),
        status=slo.NodeMetricStatus(
            update_time=update_time,
            node_metric=slo.NodeMetricInfo(
                node_usage=node_usage,
                system_usage=system_usage,
                aggregated_node_usages=aggregate(node_usage),
                aggregated_system_usages=aggregate(system_usage),
            ),
            pods_metric=pods_metric,
        ),
    )


def make_nodemetric_dict(node: str, **overrides: Any) -> dict[str, Any]:
    """`make_nodemetric(...).to_api()`: the NodeMetric JSON on the wire."""
    return make_nodemetric(node, **overrides).to_api()


def make_slo_config_data(**keys: Any) -> dict[str, str]:
    """`data` of an slo-controller-config ConfigMap: each keyword (underscores for
    dashes, e.g. ``resource_threshold_config={...}``) JSON-encoded; a str stays as is."""
    return {
        name.replace("_", "-"): value if isinstance(value, str) else json.dumps(value)
        for name, value in keys.items()
    }


def strategy_doc(
    cluster: Mapping[str, Any] | None = None, *nodes: Mapping[str, Any]
) -> dict[str, Any]:
    """A `{clusterStrategy, nodeStrategies}` document; each node strategy is given whole."""
    doc: dict[str, Any] = {}
    if cluster is not None:
        doc["clusterStrategy"] = dict(cluster)
    if nodes:
        doc["nodeStrategies"] = [dict(n) for n in nodes]
    return doc


def node_strategy(name: str, match_labels: Mapping[str, str], **fields: Any) -> dict[str, Any]:
    """A node strategy selecting `match_labels`, strategy fields inline (Koordinator's shape)."""
    return {"name": name, "nodeSelector": {"matchLabels": dict(match_labels)}, **fields}
