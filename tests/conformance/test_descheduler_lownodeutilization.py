"""kubernetes-sigs/descheduler LowNodeUtilization, case by case from its test tables.

Source: kubernetes-sigs/descheduler
`pkg/framework/plugins/nodeutilization/lownodeutilization_test.go`
(TestLowNodeUtilization, TestLowNodeUtilizationWithTaints). The reference
runs each row with DefaultEvictor `nodeFit: true` and no eviction caps other
than the row's own, measuring nodes by pod requests, and checks the number of
pods evicted (and, where the row lists them, which). The rows' "with metrics
enabled" variants read metrics.k8s.io, which nodeqos does not (its
`useNodeMetrics` reads NodeMetrics); they are not replayed here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from descheduler.config import ConfigError
from kube import objects
from tests.conformance import reference as ref
from tests.conformance.reference import (
    best_effort,
    differs,
    namespace,
    node,
    node_extended,
    node_labels,
    node_selector,
    pod,
    pod_extended,
    pod_owner,
    priority,
    protected,
    required_node_affinity,
    rs_owner,
    rs_pods,
    same,
    taints,
    three_nodes,
    unschedulable,
)

TITLE = "descheduler LowNodeUtilization"
FILE = (
    "kubernetes-sigs/descheduler pkg/framework/plugins/nodeutilization/lownodeutilization_test.go"
)
EXT = "example.com/foo"
HIGH, LOW = 10_000, 1_000
P1_5 = ("p1", "p2", "p3", "p4", "p5")
CPU_PODS = {"thresholds": {"cpu": 30, "pods": 30}, "targetThresholds": {"cpu": 50, "pods": 50}}
EXT_PODS = {"thresholds": {"pods": 30, EXT: 30}, "targetThresholds": {"pods": 50, EXT: 50}}
WEST = ("datacenter", "In", "west")
CONFIG_ERROR = "the configuration is refused"


def east_n2() -> list[objects.Node]:
    return [node("n1", 4000, 3000, 9), node("n2", 4000, 3000, 10, node_labels(datacenter="east"))]


CASES = [
    pytest.param(
        CPU_PODS,
        three_nodes(),
        [
            *(pod(n, 400, 0, "n1", ref.ds_owner) for n in ("p1", "p2", "p3", "p4")),
            pod("p5", 400, 0, "n1", pod_owner, ref.local_storage, ref.mirror),
            pod("p6", 400, 0, "n1", ref.critical),
            pod("p9", 400, 0, "n2", rs_owner),
        ],
        same(0),
        id="TestLowNodeUtilization/no evictable pods",
    ),
    pytest.param(
        CPU_PODS,
        three_nodes(),
        [*rs_pods(P1_5, "n1"), *protected("n1"), pod("p9", 400, 0, "n2", rs_owner)],
        same(4),
        id="TestLowNodeUtilization/without priorities",
    ),
    pytest.param(
        {**CPU_PODS, "evictableNamespaces": {"exclude": ["namespace1"]}},
        three_nodes(),
        [
            *(pod(n, 400, 0, "n1", pod_owner, namespace("namespace1")) for n in P1_5),
            *protected("n1"),
            pod("p9", 400, 0, "n2", rs_owner),
        ],
        same(0),
        id="TestLowNodeUtilization/without priorities, but excluding namespaces",
    ),
    pytest.param(
        {**CPU_PODS, "evictableNamespaces": {"include": ["default"]}},
        three_nodes(),
        [
            *rs_pods(("p1", "p2"), "n1"),
            pod("p3", 400, 0, "n1", namespace("namespace3")),
            pod("p4", 400, 0, "n1", namespace("namespace4")),
            pod("p5", 400, 0, "n1", namespace("namespace5")),
            *protected("n1"),
            pod("p9", 400, 0, "n2", rs_owner),
        ],
        # The table builds the plugin without validating its args; upstream's validation
        # (ValidateLowNodeUtilizationArgs) refuses `include`, and so does nodeqos's.
        differs(2, CONFIG_ERROR, "validated-args"),
        id="TestLowNodeUtilization/without priorities, but include only default namespace",
    ),
    pytest.param(
        CPU_PODS,
        three_nodes(),
        [*rs_pods(P1_5, "n1"), *protected("n1"), pod("p9", 400, 0, "n2", rs_owner)],
        same(4),
        id="TestLowNodeUtilization/without priorities stop when cpu capacity is depleted",
    ),
    pytest.param(
        CPU_PODS,
        three_nodes(),
        [
            *rs_pods(("p1", "p2", "p3", "p4"), "n1", priority(HIGH)),
            pod("p5", 400, 0, "n1", rs_owner, priority(LOW)),
            *protected("n1", priority(HIGH)),
            pod("p9", 400, 0, "n2", rs_owner),
        ],
        same(4),
        id="TestLowNodeUtilization/with priorities",
    ),
    pytest.param(
        CPU_PODS,
        three_nodes(),
        [
            pod("p1", 400, 0, "n1", rs_owner, best_effort),
            pod("p2", 400, 0, "n1", rs_owner, best_effort),
            pod("p3", 400, 0, "n1", rs_owner),
            pod("p4", 400, 0, "n1", rs_owner, best_effort),
            pod("p5", 400, 0, "n1", rs_owner, best_effort),
            *protected("n1"),
            pod("p9", 400, 0, "n2", rs_owner),
        ],
        same(("p1", "p2", "p4", "p5")),
        id="TestLowNodeUtilization/without priorities evicting best-effort pods only",
    ),
    pytest.param(
        EXT_PODS,
        [
            node("n1", 4000, 3000, 9, node_extended(EXT, 8)),
            node("n2", 4000, 3000, 10, node_extended(EXT, 8)),
            node("n3", 4000, 3000, 10, unschedulable),
        ],
        [
            *(pod(n, 0, 0, "n1", rs_owner, pod_extended(EXT, 1)) for n in P1_5),
            *(pod(n, 0, 0, "n1", pod_owner, pod_extended(EXT, 1)) for n in ("p6", "p7", "p8")),
            pod("p9", 0, 0, "n2", rs_owner, pod_extended(EXT, 1)),
        ],
        same(3),
        id="TestLowNodeUtilization/with extended resource",
    ),
    pytest.param(
        EXT_PODS,
        [
            node("n1", 4000, 3000, 9, node_extended(EXT, 8)),
            node("n2", 4000, 3000, 10),
            node("n3", 4000, 3000, 10, unschedulable),
        ],
        [pod("p1", 0, 0, "n1", rs_owner, pod_extended(EXT, 1)), pod("p9", 0, 0, "n2", rs_owner)],
        same(0),
        id="TestLowNodeUtilization/with extended resource in some of nodes",
    ),
    pytest.param(
        {
            "thresholds": {"pods": 5, EXT: 10},
            "targetThresholds": {"pods": 5, EXT: 10},
            "useDeviationThresholds": True,
        },
        [
            node("n1", 4000, 3000, 10, node_extended(EXT, 8)),
            node("n2", 4000, 3000, 10, node_extended(EXT, 8)),
            node("n3", 4000, 3000, 10, unschedulable),
        ],
        [
            pod("p1", 0, 0, "n1", rs_owner, pod_extended(EXT, 1)),
            pod("p2", 0, 0, "n2", rs_owner, pod_extended(EXT, 7)),
            pod("p3", 0, 0, "n2", rs_owner),
            pod("p8", 0, 0, "n3", rs_owner),
            pod("p9", 0, 0, "n3", rs_owner),
        ],
        # n2 is over on the extended resource only: the reference moves p2 (7 of it) to n1,
        # which puts n1 at 8/8, far over its own mark; nodeqos refuses that move
        # (would_overload_destination) and p3 frees none of it.
        differs(1, 0, "ledger"),
        id="TestLowNodeUtilization/with extended resource in some of nodes with deviation",
    ),
    pytest.param(
        CPU_PODS,
        [node("n1", 4000, 3000, 9), node("n2", 4000, 3000, 10, unschedulable)],
        [*rs_pods(P1_5, "n1"), *protected("n1")],
        same(0),
        id="TestLowNodeUtilization/without priorities, but only other node is unschedulable",
    ),
    pytest.param(
        CPU_PODS,
        east_n2(),
        [
            *rs_pods(("p1", "p2", "p3"), "n1"),
            pod("p4", 400, 0, "n1", pod_owner, node_selector(datacenter="west")),
            pod("p5", 400, 0, "n1", pod_owner, node_selector(datacenter="west")),
            *protected("n1"),
        ],
        same(3),
        id="TestLowNodeUtilization/without priorities, but only other node doesn't match pod "
        "node selector for p4 and p5",
    ),
    pytest.param(
        CPU_PODS,
        east_n2(),
        [
            *rs_pods(("p1", "p2", "p3"), "n1"),
            pod("p4", 400, 0, "n1", pod_owner, required_node_affinity(*WEST)),
            pod("p5", 400, 0, "n1", pod_owner, required_node_affinity(*WEST)),
            *protected("n1"),
            pod("p9", 0, 0, "n2", rs_owner),
        ],
        same(3),
        id="TestLowNodeUtilization/without priorities, but only other node doesn't match pod "
        "node affinity for p4 and p5",
    ),
    pytest.param(
        {
            "thresholds": {"cpu": 5, "pods": 5},
            "targetThresholds": {"cpu": 5, "pods": 5},
            "useDeviationThresholds": True,
        },
        three_nodes(),
        [*rs_pods(P1_5, "n1"), *protected("n1"), pod("p9", 400, 0, "n2", rs_owner)],
        same(2),
        id="TestLowNodeUtilization/deviation thresholds",
    ),
    pytest.param(
        {
            "thresholds": {"cpu": 5, "pods": 5},
            "targetThresholds": {"cpu": 5, "pods": 5},
            "useDeviationThresholds": True,
        },
        [
            node("n1", 4000, 3000, 10),
            node("n2", 4000, 3000, 10),
            node("n3", 4000, 3000, 10, unschedulable),
        ],
        [
            *rs_pods(P1_5, "n1", memory=375),
            *protected("n1", memory=375),
            pod("p9", 400, 3000, "n2", rs_owner),
        ],
        same(0),
        id="TestLowNodeUtilization/deviation thresholds and overevicting memory",
    ),
    pytest.param(
        CPU_PODS,
        east_n2(),
        [
            *rs_pods(("p1", "p2", "p3"), "n1"),
            pod("p4", 400, 0, "n1", pod_owner, required_node_affinity(*WEST)),
            pod("p5", 400, 0, "n1", pod_owner, required_node_affinity(*WEST)),
            *protected("n1"),
            pod("p9", 0, 0, "n2", rs_owner),
        ],
        same(3),
        id="TestLowNodeUtilization/without priorities different evictions for requested and "
        "actual resources",
    ),
    pytest.param(
        {**CPU_PODS, "evictionLimits": {"node": 2}},
        three_nodes(),
        [*rs_pods(P1_5, "n1"), *protected("n1"), pod("p9", 400, 0, "n2", rs_owner)],
        same(2),
        id="TestLowNodeUtilization/without priorities with node eviction limit",
    ),
]

# TestLowNodeUtilizationWithTaints: n1 (2000m, 10 pods) holds 8 pods of 200m; n2 and n3
# (1000m, 10 pods) one each; pods marks 20 / 70. The reference caps evictions per node
# at the row's expected count (`WithMaxPodsToEvictPerNode(&item.evictionsExpected)`).
TAINT = {"key": "key", "value": "value", "effect": "NoSchedule"}
TOLERATE = ref.spec(tolerations=[{"key": "key", "value": "value"}])


def taint_pods(last: objects.Pod | None = None) -> list[objects.Pod]:
    found = [pod(f"pod_{i}_n1", 200, 0, "n1", rs_owner) for i in range(1, 8 if last else 9)]
    return found + ([last] if last else [])


N1 = node("n1", 2000, 3000, 10)
N2 = node("n2", 1000, 3000, 10)
N3_TAINTED = node("n3", 1000, 3000, 10, taints(TAINT))
TAINT_ARGS = {"thresholds": {"pods": 20}, "targetThresholds": {"pods": 70}}
TOLERATING = pod("tolerate_pod", 200, 0, "n1", rs_owner, TOLERATE)
TAINTS = [
    pytest.param(
        [N1, N2, node("n3", 1000, 3000, 10)],
        [*taint_pods(), pod("pod_9_n2", 200, 0, "n2", rs_owner)],
        1,
        same(1),
        id="TestLowNodeUtilizationWithTaints/No taints",
    ),
    pytest.param(
        [N1, N3_TAINTED],
        [*taint_pods(), pod("pod_9_n3", 200, 0, "n3", rs_owner)],
        0,
        same(0),
        id="TestLowNodeUtilizationWithTaints/No pod tolerates node taint",
    ),
    pytest.param(
        [N1, N3_TAINTED],
        [*taint_pods(TOLERATING), pod("pod_9_n3", 200, 0, "n3", rs_owner)],
        1,
        same(1),
        id="TestLowNodeUtilizationWithTaints/Pod which tolerates node taint",
    ),
    pytest.param(
        [N1, N3_TAINTED],
        [*taint_pods(TOLERATING), pod("pod_9_n3", 200, 0, "n3", rs_owner)],
        0,
        same(0),
        id="TestLowNodeUtilizationWithTaints/Pod which tolerates node taint, set "
        "maxPodsToEvictTotal(0), should not be expelled",
    ),
]


def run(
    args: Mapping[str, Any],
    nodes: Sequence[objects.Node],
    pods: Sequence[objects.Pod],
    settings: Mapping[str, Any] | None = None,
) -> list[str]:
    settings = {"nodeFit": True, **(settings or {})}
    return ref.evictions("balance", "LowNodeUtilization", args, nodes, pods, settings)


@pytest.mark.parametrize(("args", "nodes", "pods", "expect"), CASES)
def test_case(
    args: Mapping[str, Any],
    nodes: Sequence[objects.Node],
    pods: Sequence[objects.Pod],
    expect: ref.Expect,
) -> None:
    """The row's number of evictions (or which pods, where the row names them)."""
    if expect.wanted == CONFIG_ERROR:
        with pytest.raises(ConfigError, match=r"evictableNamespaces\.include"):
            run(args, nodes, pods)
        return
    ref.check(run(args, nodes, pods), expect)


@pytest.mark.parametrize(("nodes", "pods", "per_node", "expect"), TAINTS)
def test_taints(
    nodes: Sequence[objects.Node], pods: Sequence[objects.Pod], per_node: int, expect: ref.Expect
) -> None:
    """A destination's taint counts only for the pods that do not tolerate it."""
    ref.check(run(TAINT_ARGS, nodes, pods, {"maxNoOfPodsToEvictPerNode": per_node}), expect)


ALL = (CASES, TAINTS)
