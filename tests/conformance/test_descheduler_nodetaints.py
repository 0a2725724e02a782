"""kubernetes-sigs/descheduler RemovePodsViolatingNodeTaints, case by case from its tables.

Source: kubernetes-sigs/descheduler
`pkg/framework/plugins/removepodsviolatingnodetaints/node_taint_test.go`
(TestDeletePodsViolatingNodeTaints, TestToleratesTaint). Rows run with
DefaultEvictor `evictLocalStoragePods`, `evictSystemCriticalPods` and `nodeFit`
as the row sets them, the row's caps, and count evictions. Single-node rows
get an empty spare node (`reference.with_spare`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from kube import constraints, objects
from tests.conformance import reference as ref
from tests.conformance.reference import (
    critical,
    ds_owner,
    local_storage,
    mirror,
    node_labels,
    pod_owner,
    same,
    taints,
    unschedulable,
)

TITLE = "descheduler RemovePodsViolatingNodeTaints"
FILE = (
    "kubernetes-sigs/descheduler "
    "pkg/framework/plugins/removepodsviolatingnodetaints/node_taint_test.go"
)
TEST = "TestDeletePodsViolatingNodeTaints"


def taint(index: int, key: str = "testTaint", effect: str = "NoSchedule") -> dict[str, str]:
    """`createNoScheduleTaint` ignores its key argument: every taint is testTaint<i>=test<i>."""
    return {"key": f"testTaint{index}", "value": f"test{index}", "effect": effect}


def tolerate(key: str, value: str, index: int, effect: str = "NoSchedule") -> Any:
    """`addTolerationToPod`: one toleration (operator Equal by default) replacing any others."""
    return ref.spec(
        tolerations=[{"key": f"{key}{index}", "value": f"{value}{index}", "effect": effect}]
    )


def tolerate_both(raw: dict[str, Any]) -> None:
    """p15's two calls: the second `addTolerationToPod` replaces the first."""
    tolerate("testingTaint", "testing", 1)(raw)


TEST_TAINT_1 = taint(1)
TOLERATES_1 = tolerate("testTaint", "test", 1)
TOLERATES_X = tolerate("testTaintX", "testX", 1)


def node(name: str, *setters: Any) -> objects.Node:
    return ref.node(name, 2000, 3000, 10, *setters)


def pod(name: str, node_name: str, *setters: Any) -> objects.Pod:
    """`buildTestPodWithNormalOwnerRef`."""
    return ref.pod(name, 100, 0, node_name, pod_owner, *setters)


N1 = node("n1", taints(TEST_TAINT_1))
N2 = node("n2", taints(taint(1, "testingTaint")))
N7 = node("n7", taints(TEST_TAINT_1, taint(1, "testingTaint")))


def case(
    name: str,
    nodes: Sequence[objects.Node],
    pods: Sequence[objects.Pod],
    expected: int,
    **settings: Any,
) -> Any:
    return pytest.param(nodes, pods, settings, same(expected), id=f"{TEST}/{name}")


CRITICAL_ETC = [
    pod("p7", "n2", critical),
    ref.pod("p8", 100, 0, "n2", ds_owner),
    pod("p9", "n2", local_storage),
    pod("p10", "n2", mirror),
]
CASES = [
    case(
        "Pods not tolerating node taint should be evicted",
        [N1],
        [pod("p1", "n1", TOLERATES_1), pod("p2", "n1"), pod("p3", "n1", TOLERATES_1)],
        1,
    ),
    case(
        "Pods with tolerations but not tolerating node taint should be evicted",
        [N1],
        [pod("p1", "n1", TOLERATES_1), pod("p3", "n1", TOLERATES_1), pod("p4", "n1", TOLERATES_X)],
        1,
    ),
    case(
        "Only <maxNoOfPodsToEvictTotal> number of Pods not tolerating node taint should be evicted",
        [N1],
        [pod("p1", "n1", TOLERATES_1), pod("p5", "n1"), pod("p6", "n1")],
        1,
        maxNoOfPodsToEvictPerNode=2,
        maxNoOfPodsToEvictTotal=1,
    ),
    case(
        "Only <maxPodsToEvictPerNode> number of Pods not tolerating node taint should be evicted",
        [N1],
        [pod("p1", "n1", TOLERATES_1), pod("p5", "n1"), pod("p6", "n1")],
        1,
        maxNoOfPodsToEvictPerNode=1,
    ),
    case(
        "Only <maxNoOfPodsToEvictPerNamespace> number of Pods not tolerating node taint should be evicted",
        [N1],
        [pod("p1", "n1", TOLERATES_1), pod("p5", "n1"), pod("p6", "n1")],
        1,
        maxNoOfPodsToEvictPerNamespace=1,
    ),
    case("Critical pods not tolerating node taint should not be evicted", [N2], CRITICAL_ETC, 0),
    case(
        "Critical pods except storage pods not tolerating node taint should not be evicted",
        [N2],
        CRITICAL_ETC,
        1,
        evictLocalStoragePods=True,
    ),
    case(
        "Critical and non critical pods, only non critical pods not tolerating node taint should be evicted",
        [N2],
        [CRITICAL_ETC[0], CRITICAL_ETC[1], CRITICAL_ETC[3], pod("p11", "n2")],
        1,
    ),
    case(
        "Critical and non critical pods, pods not tolerating node taint should be evicted even if they are critical",
        [N1, N2],
        [pod("p2", "n1"), CRITICAL_ETC[0], CRITICAL_ETC[2], CRITICAL_ETC[3]],
        2,
        evictSystemCriticalPods=True,
    ),
    case(
        "Pod p2 doesn't tolerate taint on it's node, but also doesn't tolerate taints on other nodes",
        [N1, N2],
        [pod("p1", "n1", TOLERATES_1), pod("p2", "n1"), pod("p3", "n1", TOLERATES_1)],
        0,
        nodeFit=True,
    ),
    case(
        "Pod p12 doesn't tolerate taint on it's node, but other nodes don't match it's selector",
        [N1, node("n3", node_labels(datacenter="east"))],
        [
            pod("p1", "n1", TOLERATES_1),
            pod("p3", "n1", TOLERATES_1),
            pod("p11", "n2", ref.node_selector(datacenter="west")),
        ],
        0,
        nodeFit=True,
    ),
    case(
        "Pod p2 doesn't tolerate taint on it's node, but other nodes are unschedulable",
        [N1, node("n4", unschedulable)],
        [pod("p1", "n1", TOLERATES_1), pod("p2", "n1"), pod("p3", "n1", TOLERATES_1)],
        0,
        nodeFit=True,
    ),
    case(
        "Pods not tolerating PreferNoSchedule node taint should not be evicted when not enabled",
        [node("n5", taints(taint(1, effect="PreferNoSchedule")))],
        [pod("p13", "n5", tolerate("testTaint", "test", 0, "PreferNoSchedule"))],
        0,
    ),
    case(
        "Pods not tolerating PreferNoSchedule node taint should be evicted when enabled",
        [node("n5", taints(taint(1, effect="PreferNoSchedule")))],
        [pod("p13", "n5", tolerate("testTaint", "test", 0, "PreferNoSchedule"))],
        1,
        includePreferNoSchedule=True,
    ),
    case(
        "Pods not tolerating excluded node taints (by key) should not be evicted",
        [N1],
        [pod("p2", "n1")],
        0,
        excludedTaints=["excludedTaint1", "testTaint1"],
    ),
    case(
        "Pods not tolerating excluded node taints (by key and value) should not be evicted",
        [N1],
        [pod("p2", "n1")],
        0,
        excludedTaints=["testTaint1=test1"],
    ),
    case(
        "The excluded taint matches the key of node1's taint, but does not match the value",
        [N1],
        [pod("p2", "n1")],
        1,
        excludedTaints=["testTaint1=test2"],
    ),
    case(
        "Critical and non critical pods, pods not tolerating node taint can't be evicted because the only "
        "available node does not have enough resources.",
        [N1, ref.node("n6", 1, 1, 1, taints(taint(1, effect="PreferNoSchedule")))],
        [pod("p2", "n1"), CRITICAL_ETC[0], CRITICAL_ETC[2], CRITICAL_ETC[3]],
        0,
        evictSystemCriticalPods=True,
        nodeFit=True,
    ),
    case(
        "Pods tolerating included taints should not get evicted even with other taints present",
        [N7],
        [pod("p1", "n1", TOLERATES_1)],
        0,
        includedTaints=["testTaint1=test1"],
    ),
    case(
        "Pods not tolerating not included taints should not get evicted",
        [N1],
        [pod("p1", "n1", TOLERATES_1), pod("p2", "n1"), pod("p4", "n1", TOLERATES_X)],
        0,
        includedTaints=["testTaint2=test2"],
    ),
    case(
        "Pods tolerating includedTaint should not get evicted. Pods not tolerating includedTaints should get evicted",
        [N1],
        [pod("p1", "n1", TOLERATES_1), pod("p2", "n1"), pod("p3", "n1", TOLERATES_1)],
        1,
        includedTaints=["testTaint1=test1"],
    ),
    case(
        "Pods not tolerating all taints are evicted when includedTaints is empty",
        [N7],
        [pod("p14", "n7", TOLERATES_1), pod("p15", "n7", tolerate_both)],
        1,
    ),
]

_PLUGIN = ("includePreferNoSchedule", "excludedTaints", "includedTaints")


@pytest.mark.parametrize(("nodes", "pods", "settings", "expect"), CASES)
def test_case(
    nodes: Sequence[objects.Node],
    pods: Sequence[objects.Pod],
    settings: Mapping[str, Any],
    expect: ref.Expect,
) -> None:
    """The row's number of evictions."""
    args = {k: v for k, v in settings.items() if k in _PLUGIN}
    rest = {k: v for k, v in settings.items() if k not in _PLUGIN}
    plugin = "RemovePodsViolatingNodeTaints"
    ref.check(ref.evictions("deschedule", plugin, args, nodes, pods, rest, spare=True), expect)


def toleration(**raw: str) -> constraints.Toleration:
    return constraints.Toleration.from_api(raw)


def a_taint(**raw: str) -> constraints.Taint:
    return constraints.Taint.from_api(raw)


NS = "NoSchedule"
TOLERATES = [
    pytest.param(
        toleration(key="foo", operator="Exists", effect=NS),
        a_taint(key="foo", effect=NS),
        same(True),
        id="TestToleratesTaint/toleration and taint have the same key and effect, and operator is Exists, "
        "and taint has no value, expect tolerated",
    ),
    pytest.param(
        toleration(key="foo", operator="Exists", effect=NS),
        a_taint(key="foo", value="bar", effect=NS),
        same(True),
        id="TestToleratesTaint/toleration and taint have the same key and effect, and operator is Exists, "
        "and taint has some value, expect tolerated",
    ),
    pytest.param(
        toleration(key="", operator="Exists", effect=NS),
        a_taint(key="foo", value="bar", effect=NS),
        same(True),
        id="TestToleratesTaint/toleration and taint have the same effect, toleration has empty key and "
        "operator is Exists, means match all taints, expect tolerated",
    ),
    pytest.param(
        toleration(key="foo", operator="Equal", value="bar", effect=NS),
        a_taint(key="foo", value="bar", effect=NS),
        same(True),
        id="TestToleratesTaint/toleration and taint have the same key, effect and value, and operator is "
        "Equal, expect tolerated",
    ),
    pytest.param(
        toleration(key="foo", operator="Equal", value="value1", effect=NS),
        a_taint(key="foo", value="value2", effect=NS),
        same(False),
        id="TestToleratesTaint/toleration and taint have the same key and effect, but different values, "
        "and operator is Equal, expect not tolerated",
    ),
    pytest.param(
        toleration(key="foo", operator="Equal", value="bar", effect=NS),
        a_taint(key="foo", value="bar", effect="NoExecute"),
        same(False),
        id="TestToleratesTaint/toleration and taint have the same key and value, but different effects, "
        "and operator is Equal, expect not tolerated",
    ),
]


@pytest.mark.parametrize(("the_toleration", "the_taint", "expect"), TOLERATES)
def test_tolerates(
    the_toleration: constraints.Toleration, the_taint: constraints.Taint, expect: ref.Expect
) -> None:
    """Whether one toleration tolerates one taint."""
    assert the_toleration.tolerates(the_taint) is expect.wanted


ALL = (CASES, TOLERATES)
