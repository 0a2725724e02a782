"""LowNodeUtilization on metrics-server usage reads what its decisions need (issue #37).

Every node's NodeMetrics each cycle; PodMetrics only of the pods on overutilized
nodes, when the drain first asks: a namespace's list where the wanted pods are
many, one GET per pod where they are few; kept between cycles until
metrics-server can have renewed them. Counted at the fake metrics-server the
conformance rows use (`fakes.MetricsServer`).
"""

from __future__ import annotations

from typing import Any

from descheduler import framework, plugins, usagesources
from descheduler.framework import CycleReport
from kube import objects, rest
from tests import builders
from tests.descheduler import fakes

NAME = "LowNodeUtilization"
ARGS = {
    "thresholds": {"cpu": 20},
    "targetThresholds": {"cpu": 70},
    "metricsUtilization": {"source": "KubernetesMetrics"},
}
NODES = {"a": (3600, 1 << 30), "b": (400, 1 << 30), "c": (200, 1 << 30), "d": (2000, 1 << 30)}


def pod(namespace: str, name: str, node: str, **overrides: Any) -> objects.Pod:
    return builders.make_pod(name, namespace=namespace, node=node, cpu="10m", **overrides)


def cluster() -> tuple[list[objects.Pod], dict[str, tuple[int, int]]]:
    """a (90% of 4 cores by metrics-server) holds big/a-big and hot/a-0..4, 600m each;
    namespace big has 60 more pods on d (50%), cool has b's and c's (10%, 5%).

    a must shed two pods (90% -> 75% -> 60%, target 70%): big/a-big (namespace
    order) and hot/a-0. big's one wanted pod among 61 is worth a GET; hot's five
    wanted pods out of five a list.
    """
    pods = [
        pod("big", "a-big", "a"),
        *(pod("hot", f"a-{i}", "a") for i in range(5)),
        *(pod("big", f"d-{i}", "d") for i in range(60)),
        pod("cool", "b-0", "b"),
        pod("cool", "c-0", "c"),
    ]
    usage = {p.key: (600, 64 << 20) for p in pods if p.node_name == "a"}
    usage |= {f"big/d-{i}": (33, 1 << 20) for i in range(60)}
    usage |= {"cool/b-0": (400, 1 << 20), "cool/c-0": (200, 1 << 20)}
    return pods, usage


def harness(metrics: fakes.MetricsServer, pods: list[objects.Pod]) -> fakes.Harness:
    raw = fakes.plugin_policy(NAME, ARGS, point="balance", dryRun=True)
    source = framework.StaticSource(nodes=fakes.nodes(*NODES), pods=pods)
    sources = usagesources.Sources(metrics_server=metrics)
    return fakes.harness(raw, plugins.registry(), source, sources=sources)


FIRST_READS = [("nodes",), ("pod", "big/a-big"), ("pods_in", "hot")]


def test_pod_metrics_are_read_only_for_the_overutilized_nodes_pods() -> None:
    """One NodeMetrics list, then a GET for big/a-big and a list of hot: nothing of b, c, d."""
    pods, usage = cluster()
    metrics = fakes.MetricsServer(NODES, usage)
    report = harness(metrics, pods).runner.run_once()
    assert report.evicted_pods == ["big/a-big", "hot/a-0"]
    assert metrics.take_requests() == FIRST_READS


def summary(report: CycleReport) -> tuple[Any, ...]:
    return (
        [(e.pod, e.node, e.reason) for e in report.evictions],
        [(s.pod, s.reason_code.value) for s in report.skipped],
        [(n.reason.value, n.detail) for n in report.notes],
    )


def test_a_second_cycle_reads_no_pod_until_metrics_server_renews_its_node() -> None:
    """Same NodeMetrics stamp: only the NodeMetrics list; a new stamp or MAX_AGE: read again."""
    pods, usage = cluster()
    metrics = fakes.MetricsServer(NODES, usage)
    h = harness(metrics, pods)
    first = h.runner.run_once()
    metrics.take_requests()
    h.clock.advance(seconds=5)
    second = h.runner.run_once()
    assert metrics.take_requests() == [("nodes",)]
    assert summary(second) == summary(first)
    metrics.stamp = "t1"  # metrics-server stored a new scrape
    assert summary(h.runner.run_once()) == summary(first)
    assert metrics.take_requests() == FIRST_READS
    h.clock.advance(seconds=usagesources.podusage.MAX_AGE.total_seconds())
    h.runner.run_once()
    assert metrics.take_requests() == FIRST_READS


def test_a_pod_usage_that_cannot_be_read_stops_the_drain_with_a_note() -> None:
    """big/a-big read (GET) and moved; hot's list times out: no more moves, metrics_expired."""
    pods, usage = cluster()
    metrics = fakes.MetricsServer(NODES, usage)
    metrics.failures["pods_in"] = rest.ApiUnavailable("GET hot pods: Read timed out")
    report = harness(metrics, pods).runner.run_once()
    assert report.failures == ()
    assert report.evicted_pods == ["big/a-big"]
    assert [(n.reason.value, n.detail) for n in report.notes] == [
        (
            "metrics_expired",
            "cannot read KubernetesMetrics pod usage (GET hot pods: Read timed out);"
            " no more pods move this cycle",
        )
    ]
