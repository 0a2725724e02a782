"""Koordinator LowNodeLoad, case by case from its own test tables: the plugin's cycles.

Source: koordinator-sh/koordinator
`pkg/descheduler/framework/plugins/loadaware/low_node_load_test.go`. Each
`pytest.param` id is the Go test and the row's `name`. The reference runs
every row with one node pool (no selector), `nodeFit: true`,
`anomalyCondition.consecutiveAbnormalities: 1`, DefaultEvictor with zero-value
args, no eviction caps (TestMaxEvictionTotal: a total cap), and NodeMetrics in
which each pod reports its requests as its usage (`setupNodeMetrics`); it
checks the number of pods evicted. Those settings are the case's here too.
The same file's tables of helpers (eviction reason, pool selector, anomaly
detector, raw allocatable) are in `test_koordinator_lownodeload_units`.
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
    differs,
    ds_owner,
    koord_batch,
    local_storage,
    mirror,
    namespace,
    node,
    node_extended,
    node_labels,
    node_selector,
    pod,
    pod_extended,
    pod_owner,
    priority,
    required_node_affinity,
    rs_owner,
    same,
    unschedulable,
)

TITLE = "Koordinator LowNodeLoad"
FILE = "koordinator pkg/descheduler/framework/plugins/loadaware/low_node_load_test.go"
EXT = "example.com/foo"  # the table's extendedResource
HIGH, LOW = 10_000, 1_000  # the table's highPriority / lowPriority


protected = ref.protected


three_nodes = ref.three_nodes
rs_pods = ref.rs_pods


P1_5 = ("p1", "p2", "p3", "p4", "p5")
CPU_PODS_30_50 = {"low": {"cpu": 30, "pods": 30}, "high": {"cpu": 50, "pods": 50}}


def marks(low: Mapping[str, int], high: Mapping[str, int], **more: Any) -> dict[str, Any]:
    return {"low": low, "high": high, **more}


CASES = [
    pytest.param(
        CPU_PODS_30_50,
        three_nodes(),
        [
            pod("p1", 400, 0, "n1", ds_owner),
            pod("p2", 400, 0, "n1", ds_owner),
            pod("p3", 400, 0, "n1", ds_owner),
            pod("p4", 400, 0, "n1", ds_owner),
            pod("p5", 400, 0, "n1", pod_owner, local_storage, mirror),
            pod("p6", 400, 0, "n1", critical),
            pod("p9", 400, 0, "n2", rs_owner),
        ],
        same(0),
        id="TestLowNodeLoad/no evictable pods",
    ),
    pytest.param(
        CPU_PODS_30_50,
        three_nodes(),
        [*rs_pods(P1_5, "n1"), *protected("n1"), pod("p9", 400, 0, "n2", rs_owner)],
        same(4),
        id="TestLowNodeLoad/without priorities",
    ),
    pytest.param(
        {**CPU_PODS_30_50, "evictableNamespaces": {"exclude": ["namespace1"]}},
        three_nodes(),
        [
            *(pod(n, 400, 0, "n1", namespace("namespace1")) for n in P1_5),
            *protected("n1"),
            pod("p9", 400, 0, "n2", rs_owner),
        ],
        same(0),
        id="TestLowNodeLoad/without priorities, but excluding namespaces",
    ),
    pytest.param(
        {**CPU_PODS_30_50, "evictableNamespaces": {"include": ["default"]}},
        three_nodes(),
        [
            *rs_pods(("p1", "p2"), "n1"),
            pod("p3", 400, 0, "n1", namespace("namespace3")),
            pod("p4", 400, 0, "n1", namespace("namespace4")),
            pod("p5", 400, 0, "n1", namespace("namespace5")),
            *protected("n1"),
            pod("p9", 400, 0, "n2", rs_owner),
        ],
        same(2),
        id="TestLowNodeLoad/without priorities, but include only default namespace",
    ),
    pytest.param(
        CPU_PODS_30_50,
        three_nodes(),
        [
            *(pod(n, 400, 300, "n1", rs_owner) for n in P1_5),
            pod("p6", 400, 300, "n1", ds_owner),
            pod("p7", 400, 300, "n1", pod_owner, local_storage, mirror),
            pod("p8", 400, 300, "n1", critical),
            pod("p9", 400, 2100, "n2", rs_owner),
        ],
        same(3),  # "only 3 pods can be evicted before memory is depleted"
        id="TestLowNodeLoad/without priorities stop when memory capacity is depleted",
    ),
    pytest.param(
        CPU_PODS_30_50,
        three_nodes(),
        [
            *rs_pods(("p1", "p2", "p3", "p4"), "n1", priority(HIGH)),
            pod("p5", 400, 0, "n1", rs_owner, priority(LOW)),
            pod("p6", 400, 0, "n1", ds_owner, priority(HIGH)),
            pod("p7", 400, 0, "n1", pod_owner, priority(LOW), local_storage, mirror),
            pod("p8", 400, 0, "n1", critical),
            pod("p9", 400, 0, "n2", rs_owner),
        ],
        same(4),
        id="TestLowNodeLoad/with priorities",
    ),
    pytest.param(
        CPU_PODS_30_50,
        three_nodes(),
        [
            pod("p1", 400, 0, "n1", rs_owner, best_effort),
            pod("p2", 400, 0, "n1", rs_owner, best_effort),
            pod("p3", 400, 0, "n1", rs_owner),
            pod("p4", 400, 0, "n1", rs_owner, best_effort),
            pod("p5", 400, 0, "n1", rs_owner, best_effort),
            pod("p6", 400, 0, "n1", ds_owner),
            pod("p7", 400, 0, "n1", pod_owner, local_storage, mirror),
            pod("p8", 400, 0, "n1", critical),
            pod("p9", 400, 0, "n2", rs_owner),
        ],
        same(("p1", "p2", "p4", "p5")),
        id="TestLowNodeLoad/without priorities evicting best-effort pods only",
    ),
    pytest.param(
        marks({"pods": 30, EXT: 30}, {"pods": 50, EXT: 50}),
        [
            node("n1", 4000, 3000, 9, node_extended(EXT, 8)),
            node("n2", 4000, 3000, 10, node_extended(EXT, 8)),
            node("n3", 4000, 3000, 10, unschedulable),
        ],
        [
            *(pod(n, 0, 0, "n1", rs_owner, pod_extended(EXT, 1)) for n in P1_5),
            pod("p6", 0, 0, "n1", pod_owner, pod_extended(EXT, 1)),
            pod("p7", 0, 0, "n1", pod_owner, pod_extended(EXT, 1), local_storage, mirror),
            pod("p8", 0, 0, "n1", pod_extended(EXT, 1), critical),
            pod("p9", 0, 0, "n2", rs_owner, pod_extended(EXT, 1)),
        ],
        same(3),  # "only 3 pods can be evicted before extended resource is depleted"
        id="TestLowNodeLoad/with extended resource",
    ),
    pytest.param(
        marks({"pods": 30, EXT: 30}, {"pods": 50, EXT: 50}),
        [
            node("n1", 4000, 3000, 9, node_extended(EXT, 8)),
            node("n2", 4000, 3000, 10),
            node("n3", 4000, 3000, 10, unschedulable),
        ],
        [
            pod("p1", 0, 0, "n1", rs_owner, pod_extended(EXT, 1)),
            pod("p9", 0, 0, "n2", rs_owner),
        ],
        same(0),  # "there's no enough extended resource in node2"
        id="TestLowNodeLoad/with extended resource in some of nodes",
    ),
    pytest.param(
        CPU_PODS_30_50,
        [node("n1", 4000, 3000, 9), node("n2", 4000, 3000, 10, unschedulable)],
        [*rs_pods(P1_5, "n1"), *protected("n1"), pod("p9", 400, 0, "n2", rs_owner)],
        same(0),
        id="TestLowNodeLoad/without priorities, but only other node is unschedulable",
    ),
    pytest.param(
        CPU_PODS_30_50,
        [node("n1", 4000, 3000, 9), node("n2", 4000, 3000, 10, node_labels(datacenter="east"))],
        [
            *rs_pods(("p1", "p2", "p3"), "n1"),
            pod("p4", 400, 0, "n1", node_selector(datacenter="west")),
            pod("p5", 400, 0, "n1", node_selector(datacenter="west")),
            *protected("n1"),
            pod("p9", 400, 0, "n2", rs_owner),
        ],
        same(3),
        id="TestLowNodeLoad/without priorities, but only other node doesn't match pod node "
        "selector for p4 and p5",
    ),
    pytest.param(
        CPU_PODS_30_50,
        [node("n1", 4000, 3000, 9), node("n2", 4000, 3000, 10, node_labels(datacenter="east"))],
        [
            *rs_pods(("p1", "p2", "p3"), "n1"),
            pod("p4", 400, 0, "n1", required_node_affinity("datacenter", "In", "west")),
            pod("p5", 400, 0, "n1", required_node_affinity("datacenter", "In", "west")),
            *protected("n1"),
            pod("p9", 0, 0, "n2", rs_owner),
        ],
        same(3),
        id="TestLowNodeLoad/without priorities, but only other node doesn't match pod node "
        "affinity for p4 and p5",
    ),
    pytest.param(
        marks({"cpu": 5, "pods": 5}, {"cpu": 5, "pods": 5}, useDeviationThresholds=True),
        three_nodes(),
        [*rs_pods(P1_5, "n1"), *protected("n1"), pod("p9", 400, 0, "n2", rs_owner)],
        same(2),
        id="TestLowNodeLoad/deviation thresholds",
    ),
    pytest.param(
        marks(
            {"cpu": 30, "pods": 30},
            {"cpu": 90, "pods": 90},
            prodLow={"cpu": 20, "pods": 20},
            prodHigh={"cpu": 40, "pods": 40},
        ),
        three_nodes(),
        [
            *rs_pods(("p1", "p2"), "n1"),
            *rs_pods(("p3", "p4", "p5"), "n1", koord_batch),
            *protected("n1"),
            pod("p9", 400, 0, "n2", rs_owner),
        ],
        same(2),
        id="TestLowNodeLoad/node && prod thresholds, node under thresholds, but prod over "
        "thresholds",
    ),
    pytest.param(
        marks(
            {"cpu": 30, "pods": 30},
            {"cpu": 70, "pods": 80},
            prodLow={"cpu": 20, "pods": 20},
            prodHigh={"cpu": 40, "pods": 40},
        ),
        three_nodes(),
        [
            *rs_pods(("p1", "p2", "p3"), "n1"),
            *rs_pods(("p4", "p5"), "n1", koord_batch),
            *protected("n1"),
            pod("p9", 400, 0, "n2", rs_owner),
        ],
        same(1),
        id="TestLowNodeLoad/both node and prod usage is higher than thresholds, only node usage "
        "will be evicted",
    ),
    pytest.param(
        marks(
            {"cpu": 0, "pods": 0},
            {"cpu": 100, "pods": 100},
            prodLow={"cpu": 30, "pods": 30},
            prodHigh={"cpu": 50, "pods": 50},
        ),
        three_nodes(),
        [*rs_pods(P1_5, "n1"), *protected("n1"), pod("p9", 400, 0, "n2", rs_owner)],
        same(4),
        id="TestLowNodeLoad/support reschedule prod pod only",
    ),
    pytest.param(
        marks(
            {"cpu": 30, "pods": 50},
            {"cpu": 60, "pods": 80},
            prodLow={"cpu": 20, "pods": 30},
            prodHigh={"cpu": 30, "pods": 50},
        ),
        [node(n, 4000, 3000, 20) for n in ("n1", "n2", "n3")],
        [
            *rs_pods((*P1_5, "p16", "p17"), "n1"),
            *protected("n1"),
            pod("p9", 400, 0, "n2", rs_owner),
            *rs_pods(("p10", "p11", "p12", "p13", "p14", "p15"), "n3"),
        ],
        # n1 (node-hot) gives 4 pods to n2; the reference then lets n3 (prod-hot) give one
        # more from the remaining node headroom, though n2's prod usage is already 50%
        # against its 30% prod mark; nodeqos's ledger sees that and moves nothing.
        differs(5, 4, "ledger"),
        id="TestLowNodeLoad/both low resource used by high node, prod pods don`t have enough "
        "resource to rebalance",
    ),
    pytest.param(
        marks(
            {"cpu": 0, "pods": 0},
            {"cpu": 100, "pods": 100},
            prodLow={"cpu": 10, "pods": 10},
            prodHigh={"cpu": 10, "pods": 10},
            useDeviationThresholds=True,
        ),
        [node(n, 4000, 3000, 20) for n in ("n1", "n2", "n3")],
        [
            *rs_pods(P1_5, "n1"),
            *protected("n1"),
            pod("p9", 400, 0, "n2", rs_owner),
            *rs_pods(("p10", "p11"), "n3"),
        ],
        same(3),
        id="TestLowNodeLoad/node is always appropriately for node usage, prod pod rebalance "
        "successful",
    ),
    pytest.param(
        marks(
            {"cpu": 0, "pods": 0},
            {"cpu": 100, "pods": 100},
            prodLow={"cpu": 60, "pods": 60},
            prodHigh={"cpu": 70, "pods": 70},
        ),
        [node(n, 4000, 3000, 20) for n in ("n1", "n2")],
        [*rs_pods(P1_5, "n1"), *protected("n1"), pod("p9", 400, 0, "n2", rs_owner)],
        same(1),
        id="TestLowNodeLoad/stop prod pod eviction when the node recovers to normal.",
    ),
    pytest.param(
        {**CPU_PODS_30_50, "maxNoOfPodsToEvictTotal": 1},
        three_nodes(),
        [*rs_pods(P1_5, "n1"), *protected("n1"), pod("p9", 400, 0, "n2", rs_owner)],
        same(1),
        id="TestMaxEvictionTotal/maxPodsToEvictTotal",
    ),
]


def lownodeload_args(row: Mapping[str, Any]) -> dict[str, Any]:
    """The reference's LowNodeLoadArgs: one node pool with the row's marks."""
    pool: dict[str, Any] = {
        "lowThresholds": row["low"],
        "highThresholds": row["high"],
        "anomalyCondition": {"consecutiveAbnormalities": 1, "consecutiveNormalities": 1},
    }
    if "prodLow" in row:
        pool["prodLowThresholds"] = row["prodLow"]
        pool["prodHighThresholds"] = row["prodHigh"]
    if row.get("useDeviationThresholds"):
        pool["useDeviationThresholds"] = True
    args: dict[str, Any] = {"nodeFit": True, "detectorCacheTimeout": "5m", "nodePools": [pool]}
    if "evictableNamespaces" in row:
        args["evictableNamespaces"] = row["evictableNamespaces"]
    return args


def run_row(
    row: Mapping[str, Any], nodes: Sequence[objects.Node], pods: Sequence[objects.Pod]
) -> list[str]:
    caps = {k: row[k] for k in ("maxNoOfPodsToEvictTotal",) if k in row}
    metrics = ref.nodemetrics(nodes, ref.request_usage(pods))
    args = lownodeload_args(row)
    return ref.evictions("balance", "LowNodeLoad", args, nodes, pods, caps, metrics=metrics)


@pytest.mark.parametrize(("row", "nodes", "pods", "expect"), CASES)
def test_case(
    row: Mapping[str, Any],
    nodes: Sequence[objects.Node],
    pods: Sequence[objects.Pod],
    expect: ref.Expect,
) -> None:
    """The row's outcome: the number of pods evicted (or which, where the row names them)."""
    evicted = run_row(row, nodes, pods)
    ref.check(evicted, expect)


ALL = (CASES,)


def test_the_cool_down_shows_once_owners_have_uids() -> None:
    """docs/deviations.md `cool-down`: "without priorities" with a real ReplicaSet (a UID).

    The table's owner references have no UID, so no two pods share a workload
    and the cool-down never applies (4 evictions, as the reference). Give the
    same ReplicaSet a UID and nodeqos moves one pod of it per cycle.
    """
    same_rs = ref.owners(("ReplicaSet", "replicaset-1", "8d6c1e4e-rs-1"))
    pods = [
        *(pod(n, 400, 0, "n1", same_rs) for n in P1_5),
        *protected("n1"),
        pod("p9", 400, 0, "n2", rs_owner),
    ]
    assert len(run_row(CPU_PODS_30_50, three_nodes(), pods)) == 1
