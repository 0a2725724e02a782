"""The reconciler against the real API server: NodeSLOs and NodeMetric specs follow
the ConfigMap and the node labels, with no write when nothing changed."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kube import events, nodeslo, rest
from manager import reconcile, views
from manager.telemetry import Metrics
from testbed import localcluster
from tests.builders import make_slo_config_data, node_strategy, strategy_doc

pytestmark = pytest.mark.controlplane

NODESLOS = "/apis/slo.koordinator.sh/v1alpha1/nodeslos"
NODEMETRICS = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"
CM_NAME = "slo-controller-config"


def eventually(check: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    """Poll `check` until it returns something truthy; that value, or AssertionError."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.05)


def threshold_doc() -> dict[str, Any]:
    """Cluster 65 (default) enabled; pool a 50; pool b 40."""
    return strategy_doc(
        {"enable": True},
        node_strategy("a", {"pool": "a"}, cpuSuppressThresholdPercent=50),
        node_strategy("b", {"pool": "b"}, cpuSuppressThresholdPercent=40),
    )


class Harness:
    """A reconciler over this test's nodes (a unique label) and ConfigMap (own namespace)."""

    def __init__(self, kube: rest.Rest, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.tag = uuid.uuid4().hex[:8]
        self.registry = CollectorRegistry()
        self.reconciler = reconcile.Reconciler(
            kube,
            Metrics(self.registry),
            events.Recorder(kube, "nodeqos-manager"),
            namespace=namespace,
            name=CM_NAME,
            node_selector=f"nodeqos-test={self.tag}",
        )
        self.nodes: list[str] = []

    def add_node(self, suffix: str, **labels: str) -> str:
        name = f"mgr-{self.tag}-{suffix}"
        localcluster.register_node(self.kube, name, labels={"nodeqos-test": self.tag, **labels})
        self.nodes.append(name)
        eventually(lambda: self.reconciler.nodes.get(name), f"node {name} in the cache")
        return name

    def put_config(self, data: dict[str, str]) -> None:
        path = f"/api/v1/namespaces/{self.namespace}/configmaps"
        body = {"metadata": {"name": CM_NAME}, "data": data}
        try:
            current = self.kube.get(f"{path}/{CM_NAME}")
        except rest.ApiError:
            created = self.kube.create(path, body)
        else:
            created = self.kube.replace(f"{path}/{CM_NAME}", {**current, "data": data})
        version = created["metadata"]["resourceVersion"]
        eventually(
            lambda: (
                (self.reconciler.configmaps.get(f"{self.namespace}/{CM_NAME}") or {})
                .get("metadata", {})
                .get("resourceVersion")
                == version
            ),
            "the ConfigMap in the cache",
        )

    def nodeslo(self, node: str) -> dict[str, Any] | None:
        return self.nodeslo_of(self.kube, node)

    @staticmethod
    def nodeslo_of(kube: rest.Rest, node: str) -> dict[str, Any] | None:
        try:
            return dict(kube.get(f"{NODESLOS}/{node}"))
        except rest.ApiError as err:
            assert err.not_found
            return None

    def threshold(self, node: str) -> int:
        found = self.nodeslo(node)
        assert found is not None, f"no NodeSLO for {node}"
        return int(found["spec"]["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"])

    def settle(self) -> None:
        """Wait until the caches hold what the last pass wrote (a later pass sees it)."""

        def caught_up() -> bool:
            for name in self.nodes:
                stored = self.reconciler.nodeslos.get(name)
                live = self.nodeslo(name)
                if (stored is None) != (live is None):
                    return False
                if (
                    live is not None
                    and stored is not None
                    and stored.resource_version != live["metadata"]["resourceVersion"]
                ):
                    return False
            return True

        eventually(caught_up, "the NodeSLO cache to catch up")
        eventually(
            lambda: all(self.reconciler.nodemetrics.get(n) for n in self.nodes),
            "the NodeMetric cache to catch up",
        )

    def cleanup(self) -> None:
        for name in self.nodes:
            for path in (f"/api/v1/nodes/{name}", f"{NODESLOS}/{name}", f"{NODEMETRICS}/{name}"):
                with contextlib.suppress(rest.ApiError, rest.ApiUnavailable):
                    self.kube.delete(path)


@pytest.fixture
def harness(kube: rest.Rest, namespace: str) -> Iterator[Harness]:
    found = Harness(kube, namespace)
    found.reconciler.start()
    eventually(lambda: found.reconciler.synced, "the informers to sync")
    yield found
    found.reconciler.stop()
    found.cleanup()


def three_nodes(h: Harness) -> tuple[str, str, str]:
    return h.add_node("a", pool="a"), h.add_node("b", pool="b"), h.add_node("c")


def test_cluster_and_two_node_strategies_render_on_three_nodes(harness: Harness) -> None:
    """Each node gets its pool's strategy, the third the cluster's; owned by its Node."""
    a, b, c = three_nodes(harness)
    harness.put_config(make_slo_config_data(resource_threshold_config=threshold_doc()))
    assert harness.reconciler.reconcile() == 6  # three NodeSLOs, three NodeMetrics
    assert [harness.threshold(n) for n in (a, b, c)] == [50, 40, 65]
    node_uid = harness.kube.get(f"/api/v1/nodes/{a}")["metadata"]["uid"]
    slo_a = harness.nodeslo(a)
    assert slo_a is not None
    owners = slo_a["metadata"]["ownerReferences"]
    assert [(o["kind"], o["name"], o["uid"]) for o in owners] == [("Node", a, node_uid)]
    assert slo_a["spec"]["resourceUsedThresholdWithBE"]["enable"] is True


def test_a_resync_with_nothing_changed_writes_nothing(harness: Harness) -> None:
    """Second pass over the same state: zero writes."""
    three_nodes(harness)
    harness.put_config(make_slo_config_data(resource_threshold_config=threshold_doc()))
    assert harness.reconciler.reconcile() > 0
    harness.settle()
    assert harness.reconciler.reconcile() == 0
    assert harness.reconciler.reconcile() == 0


def test_relabelling_a_node_moves_it_to_the_other_strategy(harness: Harness) -> None:
    """pool a → pool b: that node's NodeSLO alone is rewritten."""
    a, b, c = three_nodes(harness)
    harness.put_config(make_slo_config_data(resource_threshold_config=threshold_doc()))
    harness.reconciler.reconcile()
    harness.settle()
    harness.kube.patch(f"/api/v1/nodes/{a}", {"metadata": {"labels": {"pool": "b"}}})
    eventually(
        lambda: (
            (harness.reconciler.nodes.get(a) or views.NodeView("", "", {})).labels.get("pool")
            == "b"
        ),
        "the relabelled node in the cache",
    )
    assert harness.reconciler.reconcile() == 1
    assert [harness.threshold(n) for n in (a, b, c)] == [40, 40, 65]


def test_a_new_node_gets_its_nodeslo_in_one_pass(harness: Harness) -> None:
    """A node registered after start: one pass creates its NodeSLO and NodeMetric."""
    harness.put_config(make_slo_config_data(resource_threshold_config=threshold_doc()))
    harness.reconciler.reconcile()
    late = harness.add_node("late", pool="a")
    assert harness.reconciler.reconcile() == 2
    assert harness.threshold(late) == 50
    metric = harness.kube.get(f"{NODEMETRICS}/{late}")
    assert metric["spec"]["metricCollectPolicy"]["reportIntervalSeconds"] == 60


def test_a_deleted_nodes_nodeslo_is_deleted(harness: Harness) -> None:
    """No garbage collector on this control plane: the manager deletes what it owns."""
    a, _b, _c = three_nodes(harness)
    harness.reconciler.reconcile()
    harness.settle()
    harness.kube.delete(f"/api/v1/nodes/{a}")
    eventually(lambda: harness.reconciler.nodes.get(a) is None, "the node gone from the cache")
    harness.reconciler.reconcile()
    assert harness.nodeslo(a) is None
    with pytest.raises(rest.ApiError) as err:
        harness.kube.get(f"{NODEMETRICS}/{a}")
    assert err.value.not_found


def test_a_broken_configmap_changes_nothing_and_is_reported(harness: Harness) -> None:
    """Bad JSON in a key: zero writes, NodeSLOs as they were, an Event and a metric."""
    a, b, c = three_nodes(harness)
    harness.put_config(make_slo_config_data(resource_threshold_config=threshold_doc()))
    harness.reconciler.reconcile()
    harness.settle()
    broken = make_slo_config_data(resource_threshold_config='{"clusterStrategy": {"enable": tru')
    harness.put_config(broken)
    assert harness.reconciler.reconcile() == 0
    assert [harness.threshold(n) for n in (a, b, c)] == [50, 40, 65]
    errors = harness.registry.get_sample_value(
        "nodeqos_manager_config_errors_total", {"key": "resource-threshold-config"}
    )
    assert errors == 1
    event_list = harness.kube.get(f"/api/v1/namespaces/{harness.namespace}/events")
    reasons = [
        (e["reason"], e["involvedObject"]["name"], e["message"]) for e in event_list["items"]
    ]
    assert any(
        r == reconcile.CONFIG_ERROR_REASON and name == CM_NAME and "invalid JSON" in m
        for r, name, m in reasons
    ), reasons


def test_a_broken_configmap_at_start_writes_no_nodeslo(harness: Harness) -> None:
    """Broken since start (no last good value): NodeSLOs are neither created nor reset."""
    a = harness.add_node("a", pool="a")
    harness.put_config(make_slo_config_data(resource_threshold_config="{"))
    harness.reconciler.reconcile()
    assert harness.nodeslo(a) is None


def test_an_opted_out_nodeslo_is_left_alone(harness: Harness) -> None:
    """A hand-written NodeSLO annotated managed-by-manager=false is never rewritten."""
    a = harness.add_node("a", pool="a")
    harness.kube.create(
        NODESLOS,
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeSLO",
            "metadata": {"name": a, "annotations": {"nodeqos.io/managed-by-manager": "false"}},
            "spec": {"resourceUsedThresholdWithBE": {"cpuSuppressThresholdPercent": 33}},
        },
    )
    eventually(lambda: harness.reconciler.nodeslos.get(a), "the NodeSLO in the cache")
    harness.put_config(make_slo_config_data(resource_threshold_config=threshold_doc()))
    harness.reconciler.reconcile()
    assert harness.threshold(a) == 33


def test_a_hand_written_nodeslo_is_adopted(harness: Harness) -> None:
    """Without the opt-out the manager takes a NodeSLO over: spec and ownerReference."""
    a = harness.add_node("a", pool="a")
    harness.kube.create(
        NODESLOS,
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeSLO",
            "metadata": {"name": a},
            "spec": {"resourceUsedThresholdWithBE": {"cpuSuppressThresholdPercent": 33}},
        },
    )
    eventually(lambda: harness.reconciler.nodeslos.get(a), "the NodeSLO in the cache")
    harness.put_config(make_slo_config_data(resource_threshold_config=threshold_doc()))
    harness.reconciler.reconcile()
    slo = harness.nodeslo(a)
    assert slo is not None
    assert slo["spec"]["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"] == 50
    assert [o["kind"] for o in slo["metadata"]["ownerReferences"]] == ["Node"]


def test_nodemetric_spec_follows_colocation_config_and_keeps_status(harness: Harness) -> None:
    """The collect policy changes through the spec; the agent's status stays as written."""
    a = harness.add_node("a")
    harness.put_config(make_slo_config_data())
    harness.reconciler.reconcile()
    status = {"updateTime": "2026-01-01T00:00:00Z", "nodeMetric": {"nodeUsage": {}}}
    metric = harness.kube.get(f"{NODEMETRICS}/{a}")
    harness.kube.replace(f"{NODEMETRICS}/{a}/status", {**metric, "status": status})
    harness.put_config(
        make_slo_config_data(colocation_config={"enable": True, "metricReportIntervalSeconds": 20})
    )
    eventually(
        lambda: harness.reconciler.nodemetrics.get(a) is not None, "the NodeMetric in the cache"
    )
    assert harness.reconciler.reconcile() >= 1
    metric = harness.kube.get(f"{NODEMETRICS}/{a}")
    assert metric["spec"]["metricCollectPolicy"]["reportIntervalSeconds"] == 20
    assert metric["status"]["updateTime"] == "2026-01-01T00:00:00Z"


def test_the_agents_states_informer_reads_what_the_manager_renders(harness: Harness) -> None:
    """The agent's own NodeSLO watch takes the pool's threshold; the spec has no invalid field."""
    from agent import health, states
    from cgroups import Driver

    a = harness.add_node("a", pool="a")
    harness.put_config(make_slo_config_data(resource_threshold_config=threshold_doc()))
    harness.reconciler.reconcile()
    stored = harness.nodeslo(a)
    assert stored is not None
    assert nodeslo.merge_over_defaults(stored["spec"])[1] == []
    agent = states.States(harness.kube, a, Driver.SYSTEMD, health.Readiness())
    agent.start()
    try:
        eventually(
            lambda: agent.node_slo().thresholds.cpu_suppress_threshold_percent == 50,
            "the agent to take the rendered NodeSLO",
        )
        assert agent.node_slo().thresholds.enable is True
    finally:
        agent.stop()


def test_a_cancelled_pass_drops_its_unsent_writes(kube: rest.Rest, namespace: str) -> None:
    """A slow client (10 QPS) and 100 new nodes: cancelled after 1 s the pass ends at once
    with writes unsent; the next pass (not cancelled) finishes the job."""
    tag = uuid.uuid4().hex[:8]
    names = [f"mgrc-{tag}-{i:03d}" for i in range(100)]
    slow = rest.Rest(kube.client, qps=10, burst=1)
    reconciler = reconcile.Reconciler(
        slow,
        Metrics(CollectorRegistry()),
        None,
        namespace=namespace,
        node_selector=f"nodeqos-test={tag}",
        manage_nodemetrics=False,
    )
    try:
        for name in names:
            kube.create(
                "/api/v1/nodes",
                {"metadata": {"name": name, "labels": {"nodeqos-test": tag}}},
            )
        reconciler.start()
        eventually(lambda: len(reconciler.nodes) == len(names), "the nodes in the cache")
        eventually(lambda: reconciler.synced, "the informers to sync")
        started = time.monotonic()
        reconciler.reconcile(cancelled=lambda: time.monotonic() - started > 1.0)
        assert time.monotonic() - started < 8  # all 100 writes at 10 QPS take 10 s
        landed = sum(1 for n in names if Harness.nodeslo_of(kube, n) is not None)
        assert landed < len(names)
        reconciler.reconcile()
        assert all(Harness.nodeslo_of(kube, n) for n in names)
    finally:
        reconciler.stop()
        for name in names:
            for path in (f"/api/v1/nodes/{name}", f"{NODESLOS}/{name}"):
                with contextlib.suppress(rest.ApiError):
                    kube.delete(path)
