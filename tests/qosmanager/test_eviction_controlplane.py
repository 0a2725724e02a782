"""The evictor and A7 against the real local control plane: Eviction API, PDBs, Events."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from cgroups import CgroupVersion, Driver
from kube import events, eviction, rest
from metriccache import MetricCache, Sample, kinds
from qosmanager import (
    Decision,
    Evictor,
    Handle,
    KubeEvictionAPI,
    PodMeta,
    QoSMetrics,
    ResourceExecutor,
)
from qosmanager.plugins.memoryevict import MemoryEvict
from testbed import localcluster
from tests.cgroupfs_builder import write_pod_tree
from tests.qosmanager.builders import GI, FakeClock, FakeStates, make_node, thresholds

pytestmark = pytest.mark.controlplane


class CountingAPI(KubeEvictionAPI):
    """The real API, counting eviction calls."""

    def __init__(self, client: rest.Rest, recorder: events.Recorder) -> None:
        super().__init__(client, recorder)
        self.calls: list[str] = []

    def evict(self, namespace: str, name: str, uid: str) -> eviction.Result:
        self.calls.append(name)
        return super().evict(namespace, name, uid)


def run_pod(
    kube: rest.Rest,
    namespace: str,
    name: str,
    *,
    labels: dict[str, str] | None = None,
    priority_class: str | None = None,
    memory: str | None = None,
) -> PodMeta:
    """Create a pod bound to n1, report it Running+Ready, and view it as the agent would."""
    resources = {"requests": {"memory": memory}} if memory else {}
    spec: dict[str, Any] = {
        "nodeName": "n1",
        "containers": [{"name": "c0", "image": "busybox", "resources": resources}],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    pod = kube.create(
        f"/api/v1/namespaces/{namespace}/pods",
        {"metadata": {"name": name, "labels": labels or {}}, "spec": spec},
    )
    return PodMeta.from_api(localcluster.mark_running(kube, pod), Driver.SYSTEMD)


def event_reasons(kube: rest.Rest, namespace: str) -> list[tuple[str, str, str]]:
    items = kube.get(f"/api/v1/namespaces/{namespace}/events")["items"]
    return sorted((e["involvedObject"]["name"], e["type"], e["reason"]) for e in items)


def terminating(kube: rest.Rest, namespace: str) -> list[str]:
    pods = kube.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
    return sorted(p["metadata"]["name"] for p in pods if p["metadata"].get("deletionTimestamp"))


@pytest.fixture
def priority_classes(kube: rest.Rest, namespace: str) -> Iterator[dict[str, str]]:
    """Two PriorityClasses (koord-free and koord-batch bands), removed afterwards."""
    made = {"free": (f"{namespace}-free", 3000), "batch": (f"{namespace}-batch", 5500)}
    for name, value in made.values():
        kube.create(
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            {"metadata": {"name": name}, "value": value},
        )
    yield {key: name for key, (name, _) in made.items()}
    for name, _ in made.values():
        kube.delete(f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}")


def test_pdb_refusal_is_reported_backed_off_and_evented(
    kube: rest.Rest, namespace: str, registry: CollectorRegistry, metrics: QoSMetrics
) -> None:
    """429 from a PDB: pdb_blocked, an Event, no retry within the backoff; then allowed."""
    guarded = run_pod(kube, namespace, "guarded", labels={"app": "guarded"})
    pdb_path = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"
    kube.create(
        pdb_path,
        {
            "metadata": {"name": "guard"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
        },
    )
    localcluster.sync_pdb_status(kube, namespace, "guard")
    clock = FakeClock()
    api = CountingAPI(kube, events.Recorder(kube, "nodeqos-agent", "n1"))
    evictor = Evictor(api, metrics=metrics, clock=clock)

    assert evictor.evict(guarded, "BEMemoryEvict", "memory high") is Decision.PDB_BLOCKED
    clock.advance(29)
    assert evictor.evict(guarded, "BEMemoryEvict", "memory high") is Decision.BACKOFF
    assert api.calls == ["guarded"]
    assert event_reasons(kube, namespace) == [("guarded", "Warning", "EvictionBlocked")]

    kube.patch(f"{pdb_path}/guard", {"spec": {"minAvailable": 0}})
    localcluster.sync_pdb_status(kube, namespace, "guard")
    clock.advance(1)
    assert evictor.evict(guarded, "BEMemoryEvict", "memory high") is Decision.EVICTED
    assert terminating(kube, namespace) == ["guarded"]
    assert ("guarded", "Warning", "Evicted") in event_reasons(kube, namespace)
    assert (
        registry.get_sample_value(
            "nodeqos_agent_pod_eviction_attempts_total",
            {"reason": "BEMemoryEvict", "outcome": "pdb_blocked"},
        )
        == 1
    )


def test_a7_evicts_through_the_eviction_api_with_events(
    kube: rest.Rest,
    namespace: str,
    priority_classes: dict[str, str],
    tmp_path: Path,
    metrics: QoSMetrics,
    registry: CollectorRegistry,
) -> None:
    """A7 end to end: 48Gi of 64Gi; free-3g and free-2g are evicted, each with an Event."""
    spec = {
        "free-3g": ("free", 3),
        "free-2g": ("free", 2),
        "batch-8g": ("batch", 8),
        "batch-1g": ("batch", 1),
    }
    pods = [
        run_pod(kube, namespace, n, priority_class=priority_classes[c])
        for n, (c, _) in spec.items()
    ]
    pods.append(run_pod(kube, namespace, "ls-20g", memory="1Gi"))  # Burstable: LS
    memory = {p.uid: float(spec.get(p.name, (None, 20))[1] * GI) for p in pods}

    clock = FakeClock()
    cache = MetricCache(kinds.default_registry(), clock=clock)
    cache.append([Sample(kinds.NODE_MEMORY_USAGE, {}, clock.now, 48 * GI)])
    cache.append(
        Sample(kinds.POD_MEMORY_USAGE, {"pod_uid": uid}, clock.now, v) for uid, v in memory.items()
    )
    tree = write_pod_tree(tmp_path, CgroupVersion.V2, Driver.SYSTEMD)
    api = KubeEvictionAPI(kube, events.Recorder(kube, "nodeqos-agent", "n1"))
    handle = Handle(
        fs=tree.fs,
        executor=ResourceExecutor(tree.fs, metrics=metrics, clock=clock),
        evictor=Evictor(api, metrics=metrics, clock=clock),
        metrics=metrics,
        clock=clock,
    )
    plugin = MemoryEvict(handle)
    plugin.setup(
        kube,
        cache,
        FakeStates(
            node_value=make_node(memory="64Gi"),
            pod_list=pods,
            slo=thresholds(memoryEvictThresholdPercent=70),
        ),
    )
    try:
        plugin.tick()
    finally:
        cache.close()

    assert terminating(kube, namespace) == ["free-2g", "free-3g"]
    assert event_reasons(kube, namespace) == [
        ("free-2g", "Warning", "Evicted"),
        ("free-3g", "Warning", "Evicted"),
    ]
    assert (
        registry.get_sample_value("nodeqos_agent_pod_evictions_total", {"reason": "BEMemoryEvict"})
        == 2
    )
