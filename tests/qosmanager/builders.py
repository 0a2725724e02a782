"""Builders and fakes for the qosmanager tests: pods, nodes, NodeSLOs, states, clock, API."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cgroups import Driver
from kube import eviction, nodeslo, objects
from metriccache import MetricCache, Sample, kinds
from qosmanager import PodMeta

T0 = 1_700_000_000.0
GI = 1 << 30
BE, LS, LSR = "BE", "LS", "LSR"


class FakeClock:
    """A clock tests move by hand."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def pod_uid(name: str) -> str:
    """A stable UID per pod name, so cgroup paths are predictable."""
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, name))


def make_pod(
    name: str,
    *,
    qos: str = LS,
    priority: int | None = None,
    cpu: str | None = None,
    memory: str | None = None,
    cpu_limit: str | None = None,
    memory_limit: str | None = None,
    namespace: str = "default",
    node: str = "n1",
    containers: int = 1,
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    phase: str = "Running",
) -> dict[str, Any]:
    """A v1.Pod dict. qos BE: no resources; LS: requests only; LSR: requests == limits."""
    uid = pod_uid(name)
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    if qos != BE:
        requests = {"cpu": cpu or "500m", "memory": memory or "256Mi"}
    if qos == LSR:
        limits = dict(requests)
    if cpu_limit:
        limits["cpu"] = cpu_limit
    if memory_limit:
        limits["memory"] = memory_limit
    spec: dict[str, Any] = {
        "nodeName": node,
        "containers": [
            {
                "name": f"c{i}",
                "image": "busybox",
                "resources": {"requests": requests, "limits": limits},
            }
            for i in range(containers)
        ],
    }
    if priority is not None:
        spec["priority"] = priority
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "labels": dict(labels or {}),
            "annotations": dict(annotations or {}),
        },
        "spec": spec,
        "status": {
            "phase": phase,
            "containerStatuses": [
                {
                    "name": f"c{i}",
                    "containerID": f"containerd://{uid.replace('-', '')}{i:02d}",
                    "state": {"running": {}},
                }
                for i in range(containers)
            ],
        },
    }


def pod_meta(obj: Mapping[str, Any], driver: Driver = Driver.CGROUPFS) -> PodMeta:
    return PodMeta.from_api(obj, driver)


def make_node(
    name: str = "n1",
    *,
    cpu: str = "16",
    memory: str = "64Gi",
    allocatable_cpu: str | None = None,
    allocatable_memory: str | None = None,
    annotations: Mapping[str, str] | None = None,
) -> objects.Node:
    capacity = {"cpu": cpu, "memory": memory}
    allocatable = {"cpu": allocatable_cpu or cpu, "memory": allocatable_memory or memory}
    return objects.Node.from_api(
        {
            "metadata": {"name": name, "annotations": dict(annotations or {})},
            "status": {"capacity": capacity, "allocatable": allocatable},
        }
    )


def make_slo(**spec: Any) -> nodeslo.NodeSLOSpec:
    """A NodeSLO spec (wire form keyword arguments) merged over the defaults."""
    merged, errors = nodeslo.merge_over_defaults(spec)
    assert errors == [], errors
    return merged


def thresholds(**fields: Any) -> nodeslo.NodeSLOSpec:
    """A merged spec with `resourceUsedThresholdWithBE` enabled plus `fields`."""
    return make_slo(resourceUsedThresholdWithBE={"enable": True, **fields})


@dataclass
class FakeStates:
    """A `States` whose content tests set directly."""

    node_value: objects.Node | None = None
    pod_list: list[PodMeta] = field(default_factory=list)
    slo: nodeslo.NodeSLOSpec = field(default_factory=nodeslo.NodeSLOSpec.defaults)
    synced: bool = True
    on_wait: Callable[[float], None] | None = None

    def node(self) -> objects.Node | None:
        return self.node_value

    def pods(self) -> Sequence[PodMeta]:
        return tuple(self.pod_list)

    def node_slo(self) -> nodeslo.NodeSLOSpec:
        return self.slo

    def wait_synced(self, timeout: float) -> bool:
        if self.on_wait is not None:
            self.on_wait(timeout)
        return self.synced


class FakeHealth:
    """A `Health` that remembers every report."""

    def __init__(self) -> None:
        self.reports: list[tuple[str, bool, str]] = []
        self._lock = threading.Lock()

    def set(self, component: str, ready: bool, detail: str) -> None:
        with self._lock:
            self.reports.append((component, ready, detail))

    def last(self, component: str) -> tuple[bool, str] | None:
        with self._lock:
            for name, ready, detail in reversed(self.reports):
                if name == component:
                    return ready, detail
        return None


class FakeEvictionAPI:
    """An `EvictionAPI` answering from a per-pod script (default: evicted)."""

    def __init__(self, outcomes: Mapping[str, eviction.Outcome] | None = None) -> None:
        self.outcomes = dict(outcomes or {})
        self.calls: list[str] = []
        self.events: list[tuple[str, str, str]] = []

    def evict(self, namespace: str, name: str, uid: str) -> eviction.Result:
        self.calls.append(name)
        return eviction.Result(self.outcomes.get(name, eviction.Outcome.EVICTED), "scripted")

    def record(self, pod: PodMeta, event_type: str, reason: str, message: str) -> None:
        self.events.append((pod.name, event_type, reason))


def new_cache(clock: FakeClock) -> MetricCache:
    """An in-memory metric cache on the fake clock."""
    return MetricCache(kinds.default_registry(), clock=clock)


def node_sample(kind: kinds.MetricKind, t: float, value: float) -> Sample:
    return Sample(kind, {}, t, value)


def pod_samples(kind: kinds.MetricKind, t: float, values: Mapping[str, float]) -> list[Sample]:
    """Samples of a pod-level kind keyed by pod *name* (UIDs derived with `pod_uid`)."""
    return [Sample(kind, {"pod_uid": pod_uid(n)}, t, v) for n, v in values.items()]


def names(pods: Iterable[Any]) -> list[str]:
    """Pod names of PodMetas or candidates (anything with .name or .pod.name)."""
    return [getattr(p, "name", None) or p.pod.name for p in pods]


def make_batch_pod(
    name: str,
    *,
    batch_cpu: Sequence[tuple[str | None, str | None]] = (("1000", "2000"),),
    batch_memory: Sequence[tuple[str | None, str | None]] = ((None, "1Gi"),),
    labels: Mapping[str, str] | None = None,
    phase: str = "Running",
    running: bool = True,
) -> dict[str, Any]:
    """A BE pod whose container i asks batch_cpu[i] = (request, limit) millicores and
    batch_memory[i] = (request, limit); None leaves the value out. `running=False` gives
    the containers no id yet (kubelet has not started them)."""
    obj = make_pod(
        name,
        qos=BE,
        containers=len(batch_cpu),
        labels={"koordinator.sh/qosClass": BE, **(labels or {})},
        phase=phase,
    )
    for container, cpu, memory in zip(
        obj["spec"]["containers"], batch_cpu, batch_memory, strict=True
    ):
        requests: dict[str, str] = {}
        limits: dict[str, str] = {}
        for name_, (request, limit) in (
            ("kubernetes.io/batch-cpu", cpu),
            ("kubernetes.io/batch-memory", memory),
        ):
            if request is not None:
                requests[name_] = request
            if limit is not None:
                limits[name_] = limit
        container["resources"] = {"requests": requests, "limits": limits}
    if not running:
        obj["status"]["containerStatuses"] = [
            {"name": c["name"], "state": {"waiting": {}}} for c in obj["spec"]["containers"]
        ]
    return obj
