"""kubernetes-sigs/descheduler RemovePodsViolatingInterPodAntiAffinity, case by case.

Source: kubernetes-sigs/descheduler
`pkg/framework/plugins/removepodsviolatinginterpodantiaffinity/pod_antiaffinity_test.go`
(TestPodAntiAffinity). Nodes carry `region: main-region`; anti-affinity terms
are `SetPodAntiAffinity(key, value)`: required, `key In [value]`, topology key
`region`. Rows run with DefaultEvictor `nodeFit` as set and the row's caps,
and count evictions. Single-node rows get an empty, unschedulable spare node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from kube import objects
from tests.conformance import reference as ref
from tests.conformance.reference import (
    labels,
    node_labels,
    node_selector,
    pod_owner,
    priority,
    same,
    spec,
)

TITLE = "descheduler RemovePodsViolatingInterPodAntiAffinity"
FILE = (
    "kubernetes-sigs/descheduler "
    "pkg/framework/plugins/removepodsviolatinginterpodantiaffinity/pod_antiaffinity_test.go"
)
TEST = "TestPodAntiAffinity"
MAIN_REGION = node_labels(region="main-region")
N1 = ref.node("n1", 2000, 3000, 10, MAIN_REGION)


def anti(key: str, value: str) -> Any:
    """`SetPodAntiAffinity`."""
    term = {
        "labelSelector": {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]},
        "topologyKey": "region",
    }
    return spec(
        affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    )


def pod(name: str, *setters: Any, node_name: str = "n1") -> objects.Pod:
    return ref.pod(name, 100, 0, node_name, *setters)


def with_anti(name: str) -> objects.Pod:
    """`buildTestPodWithAntiAffinityForNode1`."""
    return pod(name, pod_owner, anti("foo", "bar"))


P2 = pod("p2", pod_owner, labels(foo="bar"))
NON_EVICT = pod("non-evict", priority(ref.SYSTEM_CRITICAL_PRIORITY), labels(foo="bar"))
FOUR = [with_anti("p1"), P2, with_anti("p3"), with_anti("p4")]
WEST_P8 = pod("p8", node_selector(datacenter="west"))


def case(
    name: str,
    pods: Sequence[objects.Pod],
    nodes: Sequence[objects.Node],
    expected: int,
    **settings: Any,
) -> Any:
    return pytest.param(nodes, pods, settings, same(expected), id=f"{TEST}/{name}")


CASES = [
    case("Maximum pods to evict - 0", FOUR, [N1], 3),
    case("Maximum pods to evict - 3", FOUR, [N1], 3, maxNoOfPodsToEvictPerNode=3),
    case(
        "Maximum pods to evict (maxPodsToEvictPerNamespace=3) - 3",
        FOUR,
        [N1],
        3,
        maxNoOfPodsToEvictPerNamespace=3,
    ),
    case(
        "Maximum pods to evict (maxNoOfPodsToEvictTotal)",
        FOUR,
        [N1],
        1,
        maxNoOfPodsToEvictPerNamespace=3,
        maxNoOfPodsToEvictTotal=1,
    ),
    case(
        "Evict only 1 pod after sorting",
        [
            pod("p5", pod_owner, labels(foo="bar"), anti("foo1", "bar1"), priority(100)),
            pod("p6", pod_owner, labels(foo="bar"), anti("foo1", "bar1"), priority(50)),
            pod("p7", pod_owner, labels(foo1="bar1"), anti("foo", "bar"), priority(0)),
        ],
        [N1],
        1,
    ),
    case(
        "Evicts pod that conflicts with critical pod (but does not evict critical pod)",
        [with_anti("p1"), NON_EVICT],
        [N1],
        1,
        maxNoOfPodsToEvictPerNode=1,
    ),
    case(  # the table repeats this row word for word
        "Evicts pod that conflicts with critical pod (but does not evict critical pod) #2",
        [with_anti("p1"), NON_EVICT],
        [N1],
        1,
        maxNoOfPodsToEvictPerNode=1,
    ),
    case(
        "Won't evict pods because node selectors don't match available nodes",
        [WEST_P8, NON_EVICT],
        [N1, ref.node("n2", 2000, 3000, 10, node_labels(datacenter="east"))],
        0,
        maxNoOfPodsToEvictPerNode=1,
        nodeFit=True,
    ),
    case(
        "Won't evict pods because only other node is not schedulable",
        [WEST_P8, NON_EVICT],
        [N1, ref.node("n3", 2000, 3000, 10, ref.unschedulable)],
        0,
        maxNoOfPodsToEvictPerNode=1,
        nodeFit=True,
    ),
    case(
        "No pod to evicted since all pod terminating",
        [
            pod("p9", pod_owner, anti("foo", "bar"), ref.terminating),
            pod("p10", pod_owner, anti("foo", "bar"), ref.terminating),
        ],
        [N1],
        0,
    ),
    case(
        "Won't evict pods because only other node doesn't have enough resources",
        FOUR,
        [N1, ref.node("n4", 2, 2, 1)],
        0,
        maxNoOfPodsToEvictPerNode=3,
        nodeFit=True,
    ),
    case(
        "Evict pod violating anti-affinity among different node (all pods have anti-affinity)",
        [with_anti("p1"), pod("p11", pod_owner, labels(foo="bar"), node_name="n5")],
        [N1, ref.node("n5", 200, 3000, 10, MAIN_REGION)],
        1,
    ),
]


@pytest.mark.parametrize(("nodes", "pods", "settings", "expect"), CASES)
def test_case(
    nodes: Sequence[objects.Node],
    pods: Sequence[objects.Pod],
    settings: Mapping[str, Any],
    expect: ref.Expect,
) -> None:
    """The row's number of evictions."""
    plugin = "RemovePodsViolatingInterPodAntiAffinity"
    ref.check(ref.evictions("deschedule", plugin, {}, nodes, pods, settings, spare=True), expect)


ALL = (CASES,)
