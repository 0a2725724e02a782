"""D4, D5 and D6 against the real API server, through real list-watch caches.

The descheduler side uses its own `RecordingRest` (informers, Eviction API,
Events), which remembers every non-GET request, so "zero writes" is measured
at the client. The test itself sets the cluster up with the admin `kube`
client, playing kubelet and disruption controller with `testbed.localcluster`.
Nodes get names and a label unique to the test, and the top-level nodeSelector
picks only them, so other tests' nodes and pods never interfere.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from descheduler import config, evictions, framework, plugins
from descheduler.config import ExtensionPoint, PluginArgs
from descheduler.framework import Handle, Reason, Snapshot
from kube import events, rest
from testbed import localcluster
from tests.descheduler import fakes
from tests.waiting import eventually

pytestmark = pytest.mark.controlplane

LABEL = "nodeqos-test"


class RecordingRest(rest.Rest):
    """A Rest client that records every write (anything but GET) it sends."""

    def __init__(self, base: rest.Rest) -> None:
        super().__init__(base.client, qps=0)
        self.writes: list[tuple[str, str]] = []

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        if method != "GET":
            self.writes.append((method, path))
        return super().request(method, path, **kwargs)


class HottestFirst:
    """Test-only balance plugin: `wanted` evictions per node, hottest node (requested CPU) first."""

    name = "HottestFirst"
    wanted = 2  # evictions per node
    drained: int | None = None  # how many nodes to work on (None: all)

    def __init__(self, args: PluginArgs, handle: Handle) -> None:
        self.handle = handle

    def balance(self, snapshot: Snapshot) -> None:
        evictor = self.handle.evictor
        order = sorted(snapshot.nodes, key=lambda n: (-snapshot.requested(n.name).cpu, n.name))
        for node in order[: self.drained]:
            left = self.wanted
            candidates = evictor.evictable(snapshot.pods_on(node.name), plugin=self.name)
            for pod in sorted(candidates, key=lambda p: (-p.requests.cpu, p.name)):
                if left and evictor.evict(pod, plugin=self.name, reason=f"{node.name} is hot"):
                    left -= 1


class HottestOnce(HottestFirst):
    """One eviction from the hottest node only."""

    name = "HottestOnce"
    wanted = 1
    drained = 1


class RetryFirst:
    """Test-only balance plugin that asks once more for the pod named `web-0`."""

    name = "RetryFirst"

    def __init__(self, args: PluginArgs, handle: Handle) -> None:
        self.handle = handle

    def balance(self, snapshot: Snapshot) -> None:
        for pod in snapshot.pods():
            if pod.name == "web-0" and snapshot.node(pod.node_name) in snapshot.nodes:
                self.handle.evictor.evict(pod, plugin=self.name, reason="retry")


def test_registry() -> framework.Registry:
    registry = plugins.registry()
    for cls in (HottestFirst, HottestOnce, RetryFirst):
        registry.register(
            cls.name, cls, args=fakes.NoArgs, extension_points=frozenset({ExtensionPoint.BALANCE})
        )
    return registry


test_registry.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


@dataclass
class Cluster:
    kube: rest.Rest
    namespace: str
    nodes: list[str]

    def node(self, suffix: str) -> str:
        return f"{self.namespace}-{suffix}"

    def add_node(self, suffix: str) -> str:
        name = self.node(suffix)
        localcluster.register_node(self.kube, name, labels={LABEL: self.namespace})
        # The API server taints new nodes not-ready:NoSchedule; the node lifecycle
        # controller (not running here) lifts it once the node is Ready.
        self.kube.patch(f"/api/v1/nodes/{name}", {"spec": {"taints": None}})
        self.nodes.append(name)
        return name

    def run_pod(
        self, name: str, node: str, *, cpu: str, owner: str, labels: dict[str, str] | None = None
    ) -> None:
        body = {
            "metadata": {
                "name": name,
                "labels": labels or {},
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "name": owner,
                        "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.namespace}/{owner}")),
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "nodeName": self.node(node),
                "containers": [
                    {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
                ],
            },
        }
        created = self.kube.create(f"/api/v1/namespaces/{self.namespace}/pods", body)
        localcluster.mark_running(self.kube, created)

    def pod(self, name: str) -> dict[str, Any]:
        return dict(self.kube.get(f"/api/v1/namespaces/{self.namespace}/pods/{name}"))

    def events(self) -> list[dict[str, Any]]:
        return list(self.kube.get(f"/api/v1/namespaces/{self.namespace}/events")["items"])


@pytest.fixture
def cluster(kube: rest.Rest, namespace: str) -> Iterator[Cluster]:
    made = Cluster(kube, namespace, [])
    yield made
    for node in made.nodes:
        kube.delete(f"/api/v1/nodes/{node}")


@dataclass
class Descheduler:
    client: RecordingRest
    source: framework.InformerSource
    runner: framework.Runner
    metrics: CollectorRegistry

    def sample(self, name: str, **labels: str) -> float:
        return self.metrics.get_sample_value(name, labels) or 0.0


@pytest.fixture
def descheduler(kube: rest.Rest, cluster: Cluster) -> Iterator[Callable[..., Descheduler]]:
    """Builds descheduler instances over fresh informers; stops them afterwards."""
    started: list[framework.InformerSource] = []

    def build(balance: list[str], **top: Any) -> Descheduler:
        client = RecordingRest(kube)
        raw = fakes.policy(balance=balance, nodeSelector=f"{LABEL}={cluster.namespace}", **top)
        registry = test_registry()
        cfg = config.decode_configuration(raw, plugins=registry.catalog())
        source = framework.InformerSource(client).start()
        started.append(source)
        assert source.wait_synced(15)
        metrics = CollectorRegistry()
        backend = evictions.EvictionAPI(client, events.Recorder(client, evictions.COMPONENT))
        runner = framework.Runner.from_config(
            cfg, registry, source=source, backend=backend, metrics=framework.Metrics(metrics)
        )
        return Descheduler(client, source, runner, metrics)

    yield build
    for source in started:
        source.stop()


def three_hot_nodes(cluster: Cluster) -> None:
    for suffix, cpu in (("a", "900m"), ("b", "800m"), ("c", "700m")):
        cluster.add_node(suffix)
        for i in range(3):
            cluster.run_pod(f"{suffix}{i}", suffix, cpu=cpu, owner=f"rs-{suffix}")


def test_d4_pdb_blocked_is_reported_and_the_next_candidate_goes(
    cluster: Cluster, descheduler: Callable[..., Descheduler]
) -> None:
    """A PDB (minAvailable 3 of 3) makes the API answer 429: pdb_blocked, not retried, next pod goes."""
    hot = cluster.add_node("hot")
    for i in (0, 1, 2):
        node = (
            "hot" if i == 0 else cluster.add_node(f"cool{i}").removeprefix(f"{cluster.namespace}-")
        )
        cluster.run_pod(f"web-{i}", node, cpu="700m", owner="web", labels={"app": "web"})
    cluster.run_pod("other-0", "hot", cpu="500m", owner="other")
    cluster.kube.create(
        f"/apis/policy/v1/namespaces/{cluster.namespace}/poddisruptionbudgets",
        {
            "metadata": {"name": "web"},
            "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    localcluster.sync_pdb_status(cluster.kube, cluster.namespace, "web")
    d = descheduler(["HottestOnce", "RetryFirst"])
    report = d.runner.run_once()
    ns = cluster.namespace
    assert report.evicted_pods == [f"{ns}/other-0"]
    assert [(s.pod, s.plugin, s.reason_code) for s in report.skipped] == [
        (f"{ns}/web-0", "HottestOnce", Reason.PDB_BLOCKED),
        (f"{ns}/web-0", "RetryFirst", Reason.PDB_BLOCKED),
    ]
    assert "disruption budget" in report.skipped[0].detail
    assert "not retried" in report.skipped[1].detail
    evictions_sent = [path for method, path in d.client.writes if path.endswith("/eviction")]
    assert evictions_sent == [
        f"/api/v1/namespaces/{ns}/pods/web-0/eviction",
        f"/api/v1/namespaces/{ns}/pods/other-0/eviction",
    ]
    labels = {"strategy": "HottestOnce", "profile": "p1", "namespace": ns, "node": hot}
    assert d.sample("nodeqos_descheduler_pods_evicted_total", result="pdb_blocked", **labels) == 1
    assert d.sample("nodeqos_descheduler_pods_evicted_total", result="error", **labels) == 0
    assert d.sample("nodeqos_descheduler_pods_evicted_total", result="success", **labels) == 1
    assert cluster.pod("other-0")["metadata"].get("deletionTimestamp")
    assert not cluster.pod("web-0")["metadata"].get("deletionTimestamp")
    [event] = cluster.events()
    assert (event["reason"], event["involvedObject"]["name"]) == ("Descheduled", "other-0")
    assert "by HottestOnce, profile p1: " in event["message"]
    assert event["message"].endswith(f"{hot} is hot")


def test_d5_caps_two_evictions_then_reset_next_cycle(
    cluster: Cluster, descheduler: Callable[..., Descheduler]
) -> None:
    """Per node 1, total 2: one pod from each of the two hottest nodes; the next cycle counts anew."""
    three_hot_nodes(cluster)
    d = descheduler(["HottestFirst"], maxNoOfPodsToEvictPerNode=1, maxNoOfPodsToEvictTotal=2)
    ns = cluster.namespace
    first = d.runner.run_once()
    assert first.evicted_pods == [f"{ns}/a0", f"{ns}/b0"]
    assert {s.pod for s in first.skipped if s.reason_code is Reason.LIMIT_REACHED} >= {
        f"{ns}/c0",
        f"{ns}/c1",
        f"{ns}/c2",
    }
    # the kubelet finishes the evictions; the caches see the pods go
    assert sorted(localcluster.finish_terminating(cluster.kube, ns)) == [f"{ns}/a0", f"{ns}/b0"]
    eventually(
        lambda: not {"a0", "b0"} & {p.name for p in d.source.state().pods if p.namespace == ns},
        "the informer to drop the evicted pods",
    )
    second = d.runner.run_once()
    # c (2100m) is now the hottest, then a (1800m), then b (1600m)
    assert second.evicted_pods == [f"{ns}/c0", f"{ns}/a1"]


def test_d6_dry_run_decides_like_the_real_run_and_writes_nothing(
    cluster: Cluster, descheduler: Callable[..., Descheduler]
) -> None:
    """Two dry-run cycles pick the real run's pods with zero writes; then the real run agrees."""
    three_hot_nodes(cluster)
    ns = cluster.namespace
    limits = {"maxNoOfPodsToEvictPerNode": 1, "maxNoOfPodsToEvictTotal": 2}
    dry = descheduler(["HottestFirst"], dryRun=True, **limits)
    first, second = dry.runner.run_once(), dry.runner.run_once()
    assert first.evicted_pods == second.evicted_pods == [f"{ns}/a0", f"{ns}/b0"]
    assert [(s.pod, s.reason_code) for s in first.skipped] == [
        (s.pod, s.reason_code) for s in second.skipped
    ]
    assert dry.client.writes == []
    assert cluster.events() == []
    for name in ("a0", "b0"):
        assert not cluster.pod(name)["metadata"].get("deletionTimestamp")
    labels = {
        "strategy": "HottestFirst",
        "profile": "p1",
        "namespace": ns,
        "node": cluster.node("a"),
    }
    assert dry.sample("nodeqos_descheduler_pods_evicted_total", result="dry_run", **labels) == 2

    real = descheduler(["HottestFirst"], **limits).runner.run_once()
    assert real.evicted_pods == first.evicted_pods
    assert [(s.pod, s.reason_code) for s in real.skipped] == [
        (s.pod, s.reason_code) for s in first.skipped
    ]
    assert sorted(e["involvedObject"]["name"] for e in cluster.events()) == ["a0", "b0"]
