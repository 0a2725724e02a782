"""kubernetes-sigs/descheduler LowNodeUtilization on actual usage (metricsUtilization).

Source: kubernetes-sigs/descheduler
`pkg/framework/plugins/nodeutilization/lownodeutilization_test.go` at v0.36.0
(commit 8005cdf78391e2c071cfa653c462dfefc2de8856): TestLowNodeUtilization's
"... with metrics enabled" variant of every row (the row's nodes and pods, as
`test_descheduler_lownodeutilization.CASES` has them, plus its `nodemetricses`,
`podmetricses` and `expectedPodsWithMetricsEvicted`, run with
`metricsUtilization: {source: KubernetesMetrics}`), and
TestLowNodeUtilizationWithPrometheusMetrics (the query's samples as data).
The readings reach the plugin through fakes behind the same Protocols as the
real metrics-server and Prometheus clients (`tests.descheduler.fakes.MetricsServer`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from descheduler import usagesources
from kube import objects
from tests.conformance import reference as ref
from tests.conformance import test_descheduler_lownodeutilization as requests_rows
from tests.conformance.reference import differs, node, pod, rs_owner, same
from tests.descheduler import fakes

TITLE = "descheduler LowNodeUtilization (metricsUtilization)"
FILE = (
    "kubernetes-sigs/descheduler pkg/framework/plugins/nodeutilization/"
    "lownodeutilization_test.go@8005cdf7"
)
ROW = "TestLowNodeUtilization/"
P1_5 = ("p1", "p2", "p3", "p4", "p5")


def readings(
    nodes: Mapping[str, tuple[int, int]], pods: Mapping[str, tuple[int, int]]
) -> fakes.MetricsServer:
    """A metrics-server that answers with the row's NodeMetrics and PodMetrics."""
    # BuildPodMetrics puts every PodMetrics in namespace default
    return fakes.MetricsServer(nodes, {f"default/{p}": usage for p, usage in pods.items()})


class Query:
    """A Prometheus that answers the query with the row's samples (node -> percent)."""

    def __init__(self, samples: Mapping[str, float]) -> None:
        self._samples = samples

    def node_usage(self, query: str) -> dict[str, int]:
        return {n: int(v * 100) for n, v in self._samples.items()}


def pods_401(*names: str) -> dict[str, tuple[int, int]]:
    return {n: (401, 0) for n in names}


USUAL = {"n1": (3201, 0), "n2": (401, 0), "n3": (11, 0)}
# row -> (nodemetricses, podmetricses, expectedPodsWithMetricsEvicted)
METRICS: dict[str, tuple[dict[str, tuple[int, int]], dict[str, tuple[int, int]], ref.Expect]] = {
    "no evictable pods": (
        {"n1": (2401, 1714978816), "n2": (401, 1714978816), "n3": (10, 1714978816)},
        pods_401(*P1_5),
        same(0),
    ),
    # 401m pods: the 4th would put n2 at 2005m over its 2000m target (the reference
    # checks only the destinations' pooled headroom before each eviction)
    "without priorities": (USUAL, pods_401(*P1_5), differs(4, 3, "ledger")),
    "without priorities, but excluding namespaces": (USUAL, pods_401(*P1_5), same(0)),
    "without priorities stop when cpu capacity is depleted": (
        {"n1": (3201, 0), "n2": (401, 0), "n3": (0, 0)},
        pods_401(*P1_5),
        differs(4, 3, "ledger"),
    ),
    "with priorities": (USUAL, pods_401(*P1_5), differs(4, 3, "ledger")),
    "without priorities evicting best-effort pods only": (
        USUAL,
        pods_401(*P1_5),
        differs(4, 3, "ledger"),
    ),
    "with extended resource": (
        USUAL,
        pods_401(*P1_5),
        # metrics-server has no example.com/foo: upstream's sync fails for every node
        differs(0, 3, "metrics-requests-for-the-rest"),
    ),
    "with extended resource in some of nodes": (USUAL, pods_401(*P1_5), same(0)),
    "with extended resource in some of nodes with deviation": (USUAL, pods_401(*P1_5), same(0)),
    "without priorities, but only other node is unschedulable": (
        {"n1": (3201, 0), "n2": (401, 0)},
        pods_401(*P1_5),
        same(0),
    ),
    "without priorities, but only other node doesn't match pod node selector for p4 and p5": (
        {"n1": (3201, 0), "n2": (401, 0)},
        pods_401("p1", "p2", "p3"),
        same(3),
    ),
    "without priorities, but only other node doesn't match pod node affinity for p4 and p5": (
        {"n1": (3201, 0), "n2": (401, 0)},
        pods_401("p1", "p2", "p3"),
        same(3),
    ),
    "deviation thresholds": (USUAL, pods_401(*P1_5), same(2)),
    "deviation thresholds and overevicting memory": (
        {"n1": (4000, 3000), "n2": (4000, 3000), "n3": (4000, 3000)},
        {**{f"p{i}": (400, 375) for i in range(1, 9)}, "p9": (400, 3000)},
        same(0),
    ),
    "without priorities different evictions for requested and actual resources": (
        {"n1": (3201, 0), "n2": (401, 0)},
        {"p1": (801, 0), "p2": (801, 0), "p3": (801, 0)},
        differs(2, 1, "ledger"),  # n2: 401m + 2 x 801m = 2003m > its 2000m target
    ),
    "without priorities with node eviction limit": (USUAL, pods_401(*P1_5), same(2)),
}


def _rows() -> list[Any]:
    out = []
    for row in requests_rows.CASES:
        name = str(row.id).removeprefix(ROW)
        if name not in METRICS:
            continue  # "include only default namespace": refused at load either way
        args, nodes, pods, _ = row.values
        node_metrics, pod_metrics, expect = METRICS[name]
        out.append(pytest.param(args, nodes, pods, node_metrics, pod_metrics, expect, id=row.id))
    return out


CASES = _rows()


def run(
    args: Mapping[str, Any],
    nodes: Sequence[objects.Node],
    pods: Sequence[objects.Pod],
    sources: usagesources.Sources,
) -> list[str]:
    settings = {"nodeFit": True}
    return ref.evictions(
        "balance", "LowNodeUtilization", args, nodes, pods, settings, sources=sources
    )


@pytest.mark.parametrize(("args", "nodes", "pods", "node_m", "pod_m", "expect"), CASES)
def test_with_metrics_enabled(
    args: Mapping[str, Any],
    nodes: Sequence[objects.Node],
    pods: Sequence[objects.Pod],
    node_m: Mapping[str, tuple[int, int]],
    pod_m: Mapping[str, tuple[int, int]],
    expect: ref.Expect,
) -> None:
    """The row's expectedPodsWithMetricsEvicted with metricsUtilization KubernetesMetrics."""
    args = {**args, "metricsUtilization": {"source": "KubernetesMetrics"}}
    sources = usagesources.Sources(metrics_server=readings(node_m, pod_m))
    ref.check(run(args, nodes, pods, sources), expect)


def test_every_metrics_row_is_replayed() -> None:
    """Each row of the table above matches a row of the requests suite (no typo'd ids)."""
    assert len(CASES) == len(METRICS)


# TestLowNodeUtilizationWithPrometheusMetrics: n1 (4000m, 3000 bytes, 9 pods), n2 and
# n3 (10 pods); p1..p5 (ReplicaSet) and p6 (DaemonSet), p7 (local storage), p8
# (critical) on n1, p9 on n2, all 400m; each row's query samples.
PROM_NODES = [node("n1", 4000, 3000, 9), node("n2", 4000, 3000, 10), node("n3", 4000, 3000, 10)]
PROM_PODS = [
    *(pod(n, 400, 0, "n1", rs_owner) for n in P1_5),
    pod("p6", 400, 0, "n1", ref.ds_owner),
    pod("p7", 400, 0, "n1", ref.local_storage),
    pod("p8", 400, 0, "n1", ref.critical),
    pod("p9", 400, 0, "n2", rs_owner),
]
SAMPLES = {"n1": 0.5695757575757561, "n2": 0.4245454545454522, "n3": 0.20381818181818104}
MR = usagesources.METRIC_RESOURCE
QUERY = {"source": "Prometheus", "prometheus": {"query": "instance:node_cpu:rate:sum"}}
PROM_ROW = "TestLowNodeUtilizationWithPrometheusMetrics/with instance:node_cpu:rate:sum query"
PROMETHEUS = [
    pytest.param(
        {"thresholds": {MR: 30}, "targetThresholds": {MR: 50}},
        SAMPLES,
        same(1),
        id=PROM_ROW,
    ),
    pytest.param(
        {"thresholds": {MR: 30}, "targetThresholds": {MR: 50}, "evictionLimits": {"node": 3}},
        SAMPLES,
        same(3),
        id=f"{PROM_ROW} with more evictions",
    ),
    pytest.param(
        {
            "thresholds": {MR: 5},
            "targetThresholds": {MR: 5},
            "useDeviationThresholds": True,
            "evictionLimits": {"node": 2},
        },
        SAMPLES,
        same(2),
        id=f"{PROM_ROW} with deviation",
    ),
    pytest.param(
        {"thresholds": {MR: 10}, "targetThresholds": {MR: 10}, "useDeviationThresholds": True},
        {"n1": 1.0, "n2": 0.5, "n3": 0.0},
        same(1),
        id=f"{PROM_ROW} and deviation thresholds",
    ),
]


@pytest.mark.parametrize(("args", "samples", "expect"), PROMETHEUS)
def test_with_prometheus(
    args: Mapping[str, Any], samples: Mapping[str, float], expect: ref.Expect
) -> None:
    """The row's expected evictions with metricsUtilization Prometheus."""
    args = {**args, "metricsUtilization": QUERY}
    sources = usagesources.Sources(prometheus=Query(samples))
    ref.check(run(args, PROM_NODES, PROM_PODS, sources), expect)


ALL = (CASES, PROMETHEUS)
