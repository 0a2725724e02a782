"""kubernetes-sigs/descheduler HighNodeUtilization, case by case from its test tables.

Source: kubernetes-sigs/descheduler
`pkg/framework/plugins/nodeutilization/highnodeutilization_test.go`
(TestHighNodeUtilization with DefaultEvictor `nodeFit: true`,
TestHighNodeUtilizationWithTaints with zero-value DefaultEvictor args and a
per-node cap equal to the row's expected count). Nodes are measured by pod
requests; the rows check the number of pods evicted and, where listed, which.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from kube import objects
from tests.conformance import reference as ref
from tests.conformance.reference import (
    best_effort,
    critical,
    ds_owner,
    local_storage,
    mirror,
    node,
    node_extended,
    node_labels,
    node_selector,
    pod,
    pod_extended,
    pod_owner,
    priority,
    rs_owner,
    rs_pods,
    same,
    taints,
    unschedulable,
)

TITLE = "descheduler HighNodeUtilization"
PLUGIN = "HighNodeUtilization"
FILE = (
    "kubernetes-sigs/descheduler pkg/framework/plugins/nodeutilization/highnodeutilization_test.go"
)
EXT = "example.com/foo"
HIGH, LOW = 10_000, 1_000
CPU_PODS_20 = {"thresholds": {"cpu": 20, "pods": 20}}
CPU_PODS_30 = {"thresholds": {"cpu": 30, "pods": 30}}


def nodes3(cpu: int = 4000, pods: int = 10, *, n3_unschedulable: bool = True) -> list[objects.Node]:
    last = (unschedulable,) if n3_unschedulable else ()
    return [
        node("n1", cpu, 3000, pods),
        node("n2", cpu, 3000, pods),
        node("n3", cpu, 3000, pods, *last),
    ]


def ext_node(name: str, amount: int, *setters: Any) -> objects.Node:
    return node(name, 4000, 3000, 10, node_extended(EXT, amount), *setters)


CASES = [
    pytest.param(
        CPU_PODS_20,
        nodes3(n3_unschedulable=False),
        [
            *rs_pods(("p1", "p2", "p3"), "n1"),
            *rs_pods(("p4", "p5", "p6"), "n2"),
            *rs_pods(("p7", "p8", "p9"), "n3"),
        ],
        same(0),
        id="TestHighNodeUtilization/no node below threshold usage",
    ),
    pytest.param(
        {"thresholds": {"cpu": 40, "pods": 40}},
        [node("n1", 4000, 3000, 9), node("n2", 4000, 3000, 10), node("n3", 4000, 3000, 10)],
        [
            pod("p1", 400, 0, "n1", pod_owner, local_storage, mirror),
            pod("p2", 400, 0, "n1", pod_owner, critical),
            pod("p3", 400, 0, "n2", ds_owner),
            pod("p4", 400, 0, "n2", ds_owner),
            *rs_pods(("p5", "p6", "p7", "p8"), "n3"),
        ],
        same(0),
        id="TestHighNodeUtilization/no evictable pods",
    ),
    pytest.param(
        CPU_PODS_20,
        nodes3(),
        [*rs_pods(("p1",), "n1"), *rs_pods(("p2",), "n2"), *rs_pods(("p3", "p4", "p5"), "n3")],
        same(0),
        id="TestHighNodeUtilization/no node to schedule evicted pods",
    ),
    pytest.param(
        CPU_PODS_30,
        nodes3(),
        [
            *rs_pods(("p1",), "n1"),
            pod("p2", 400, 0, "n1", pod_owner, critical),
            *rs_pods(("p3", "p4", "p5", "p6"), "n2"),
            *rs_pods(("p7",), "n3"),
        ],
        same(("p1", "p7")),
        id="TestHighNodeUtilization/without priorities",
    ),
    pytest.param(
        CPU_PODS_30,
        nodes3(cpu=2000),
        [
            *rs_pods(("p1",), "n1"),
            *rs_pods(("p2", "p3", "p4", "p5"), "n2"),
            *rs_pods(("p6",), "n3"),
        ],
        same(1),
        id="TestHighNodeUtilization/without priorities stop when resource capacity is depleted",
    ),
    pytest.param(
        {"thresholds": {"cpu": 30}},
        [
            node("n1", 4000, 3000, 10),
            node("n2", 2000, 3000, 10),
            node("n3", 2000, 3000, 10, unschedulable),
        ],
        [
            pod("p1", 400, 0, "n1", rs_owner, priority(LOW)),
            pod("p2", 400, 0, "n1", rs_owner, priority(HIGH)),
            *rs_pods(("p5", "p6", "p7", "p8"), "n2"),
            pod("p9", 400, 0, "n3", ds_owner),
        ],
        same(("p1",)),
        id="TestHighNodeUtilization/with priorities",
    ),
    pytest.param(
        {"thresholds": {"cpu": 30}},
        [
            node("n1", 3000, 3000, 10),
            node("n2", 3000, 3000, 5),
            node("n3", 3000, 3000, 10, unschedulable),
        ],
        [
            pod("p1", 0, 0, "n1", rs_owner, best_effort),
            *rs_pods(("p2",), "n1"),
            *rs_pods(("p3", "p4", "p5", "p6"), "n2"),
        ],
        same(("p1",)),
        id="TestHighNodeUtilization/without priorities evicting best-effort pods only",
    ),
    pytest.param(
        {"thresholds": {"cpu": 20, EXT: 40}},
        [ext_node("n1", 8), ext_node("n2", 8), node("n3", 4000, 3000, 10, unschedulable)],
        [
            *(pod(n, 100, 0, "n1", rs_owner, pod_extended(EXT, 1)) for n in ("p1", "p2")),
            *(
                pod(n, 500, 0, "n2", rs_owner, pod_extended(EXT, 1))
                for n in ("p3", "p4", "p5", "p6")
            ),
        ],
        same(("p1", "p2")),
        id="TestHighNodeUtilization/with extended resource",
    ),
    pytest.param(
        {"thresholds": {"cpu": 40, EXT: 40}},
        [ext_node("n1", 8), node("n2", 4000, 3000, 10), node("n3", 4000, 3000, 10, unschedulable)],
        [
            *(pod(n, 100, 0, "n1", rs_owner, pod_extended(EXT, 1)) for n in ("p1", "p2")),
            *rs_pods(("p3", "p4", "p5", "p6"), "n2", cpu=500),
        ],
        same(0),
        id="TestHighNodeUtilization/with extended resource in some of nodes",
    ),
    pytest.param(
        CPU_PODS_30,
        [node("n1", 4000, 3000, 9, node_labels(datacenter="west")), node("n2", 4000, 3000, 10)],
        [
            *rs_pods(("p1", "p2", "p3"), "n1"),
            pod("p4", 400, 0, "n1", ds_owner),
            pod("p5", 400, 0, "n2", rs_owner, node_selector(datacenter="west")),
        ],
        same(1),
        id="TestHighNodeUtilization/Other node match pod node selector",
    ),
    pytest.param(
        CPU_PODS_30,
        [node("n1", 4000, 3000, 9), node("n2", 4000, 3000, 10)],
        [
            *rs_pods(("p1", "p2", "p3"), "n1"),
            pod("p4", 400, 0, "n1", ds_owner),
            pod("p5", 400, 0, "n2", rs_owner, node_selector(datacenter="west")),
        ],
        same(0),
        id="TestHighNodeUtilization/Other node does not match pod node selector",
    ),
    pytest.param(
        CPU_PODS_30,
        [node("n1", 4000, 200, 9), node("n2", 4000, 3000, 10)],
        [
            *rs_pods(("p1", "p2", "p3"), "n1", memory=50),
            pod("p4", 400, 50, "n1", ds_owner),
            pod("p5", 400, 100, "n2", rs_owner),
        ],
        same(0),
        id="TestHighNodeUtilization/Other node does not have enough Memory",
    ),
    pytest.param(
        {"thresholds": {EXT: 40}, "evictionModes": ["OnlyThresholdingResources"]},
        [ext_node("n1", 10), ext_node("n2", 10), ext_node("n3", 10)],
        [
            *(pod(n, 100, 0, "n1", rs_owner, pod_extended(EXT, 3)) for n in ("p1", "p2")),
            *rs_pods(("p3", "p4", "p5", "p6"), "n2", cpu=500),
        ],
        same(0),
        id="TestHighNodeUtilization/with extended resource threshold and no extended resource pods",
    ),
]

TAINT = {"key": "key", "value": "value", "effect": "NoSchedule"}
TOLERATING = pod(
    "tolerate_pod", 200, 0, "n1", rs_owner, ref.spec(tolerations=[{"key": "key", "value": "value"}])
)
N1, N2 = node("n1", 1000, 3000, 10), node("n2", 1000, 3000, 10)
N3_TAINTED = node("n3", 1000, 3000, 10, taints(TAINT))
TAINTS = [
    pytest.param(
        [N1, N2, node("n3", 1000, 3000, 10)],
        [
            *rs_pods(("pod_1_n1", "pod_2_n1", "pod_3_n1"), "n1", cpu=200),
            pod("pod_4_n2", 200, 0, "n2", rs_owner),
        ],
        same(1),
        id="TestHighNodeUtilizationWithTaints/No taints",
    ),
    pytest.param(
        [N1, N3_TAINTED],
        [pod("pod_1_n1", 200, 0, "n1", rs_owner), pod("pod_2_n3", 200, 0, "n3", rs_owner)],
        same(0),
        id="TestHighNodeUtilizationWithTaints/No pod tolerates node taint",
    ),
    pytest.param(
        [N1, N3_TAINTED],
        [
            pod("pod_1_n1", 100, 0, "n1", rs_owner),
            TOLERATING,
            pod("pod_9_n3", 500, 0, "n3", rs_owner),
        ],
        same(1),
        id="TestHighNodeUtilizationWithTaints/Pod which tolerates node taint",
    ),
]


@pytest.mark.parametrize(("args", "nodes", "pods", "expect"), CASES)
def test_case(
    args: Mapping[str, Any],
    nodes: Sequence[objects.Node],
    pods: Sequence[objects.Pod],
    expect: ref.Expect,
) -> None:
    """The row's number of evictions (or which pods, where the row names them)."""
    evicted = ref.evictions("balance", PLUGIN, args, nodes, pods, {"nodeFit": True})
    ref.check(evicted, expect)


@pytest.mark.parametrize(("nodes", "pods", "expect"), TAINTS)
def test_taints(
    nodes: Sequence[objects.Node], pods: Sequence[objects.Pod], expect: ref.Expect
) -> None:
    """A tainted node receives only the pods that tolerate its taint."""
    per_node = {"maxNoOfPodsToEvictPerNode": expect.reference}
    ref.check(
        ref.evictions("balance", PLUGIN, {"thresholds": {"cpu": 40}}, nodes, pods, per_node), expect
    )


ALL = (CASES, TAINTS)
