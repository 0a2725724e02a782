"""kubernetes-sigs/descheduler RemovePodsHavingTooManyRestarts, case by case from its table.

Source: kubernetes-sigs/descheduler
`pkg/framework/plugins/removepodshavingtoomanyrestarts/toomanyrestarts_test.go`
(TestRemovePodsHavingTooManyRestarts). `initPods`: pod-0 .. pod-9 on node1,
pod-i with 5*i init-container and 2 x 10*i container restarts (no phase, no
container states), pod-6 DaemonSet-owned, pod-7 with local storage, pod-8 a
mirror pod, the rest owned by a Pod; plus a 150m pod on node4 and on node5.
Rows run with DefaultEvictor `nodeFit` as set and the row's caps, and count
evictions. Single-node rows get an empty, unschedulable spare node.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from kube import objects
from tests.conformance import reference as ref
from tests.conformance.reference import ds_owner, local_storage, mirror, pod_owner, same, taints

TITLE = "descheduler RemovePodsHavingTooManyRestarts"
FILE = (
    "kubernetes-sigs/descheduler "
    "pkg/framework/plugins/removepodshavingtoomanyrestarts/toomanyrestarts_test.go"
)
TEST = "TestRemovePodsHavingTooManyRestarts"
Apply = Callable[[dict[str, Any]], None]


def restarts(base: int) -> Apply:
    """`setPodContainerStatusRestartCount`: the whole status replaced."""

    def set_restarts(raw: dict[str, Any]) -> None:
        raw["status"] = {
            "initContainerStatuses": [{"name": "i", "restartCount": 5 * base}],
            "containerStatuses": [
                {"name": "a", "restartCount": 10 * base},
                {"name": "b", "restartCount": 10 * base},
            ],
        }

    return set_restarts


def init_pods(apply: Apply | None = None) -> list[objects.Pod]:
    extra = {6: (ds_owner,), 7: (pod_owner, local_storage), 8: (mirror,)}
    pods = [
        ref.pod(
            f"pod-{i}",
            100,
            0,
            "node1",
            pod_owner,
            restarts(i),
            *extra.get(i, ()),
            *((apply,) if apply else ()),
        )
        for i in range(10)
    ]
    return [
        *pods,
        ref.pod("CPU-consumer-1", 150, 100, "node4", pod_owner),
        ref.pod("CPU-consumer-2", 150, 100, "node5", pod_owner),
    ]


def node(name: str, *setters: Any) -> objects.Node:
    return ref.node(name, 2000, 3000, 10, *setters)


def crash_loop_first_container(raw: dict[str, Any]) -> None:
    raw["status"]["containerStatuses"][0]["state"] = {"waiting": {"reason": "CrashLoopBackOff"}}


def crash_loop_init(raw: dict[str, Any]) -> None:
    raw["status"]["initContainerStatuses"] = [
        {"name": "i", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
    ]


N1 = [node("node1")]


def case(
    name: str,
    args: Mapping[str, Any],
    pods: Sequence[objects.Pod],
    nodes: Sequence[objects.Node],
    expected: int,
    **settings: Any,
) -> Any:
    return pytest.param(args, nodes, pods, settings, same(expected), id=f"{TEST}/{name}")


def threshold(value: int, init: bool) -> dict[str, Any]:
    return {"podRestartThreshold": value, "includingInitContainers": init}


CASES = [
    case(
        "All pods have total restarts under threshold, no pod evictions",
        threshold(10000, True),
        init_pods(),
        N1,
        0,
    ),
    case(
        "Some pods have total restarts bigger than threshold",
        threshold(1, True),
        init_pods(),
        N1,
        6,
    ),
    case(
        "Nine pods have total restarts equals threshold(includingInitContainers=true), 6 pod evictions",
        threshold(25, True),
        init_pods(),
        N1,
        6,
    ),
    case(
        "Nine pods have total restarts equals threshold(includingInitContainers=false), 5 pod evictions",
        threshold(25, False),
        init_pods(),
        N1,
        5,
    ),
    case(
        "All pods have total restarts equals threshold(includingInitContainers=true), 6 pod evictions",
        threshold(20, True),
        init_pods(),
        N1,
        6,
    ),
    case(
        "Nine pods have total restarts equals threshold(includingInitContainers=false), 6 pod evictions",
        threshold(20, False),
        init_pods(),
        N1,
        6,
    ),
    case(
        "Five pods have total restarts bigger than threshold(includingInitContainers=true), but only 1 pod eviction",
        threshold(5 * 25 + 1, True),
        init_pods(),
        N1,
        1,
    ),
    case(
        "Five pods have total restarts bigger than threshold(includingInitContainers=false), but only 1 pod eviction",
        threshold(5 * 20 + 1, False),
        init_pods(),
        N1,
        1,
    ),
    case(
        "All pods have total restarts equals threshold(maxPodsToEvictPerNode=3), 3 pod evictions",
        threshold(1, True),
        init_pods(),
        N1,
        3,
        maxNoOfPodsToEvictPerNode=3,
    ),
    case(
        "All pods have total restarts equals threshold(maxNoOfPodsToEvictPerNamespace=3), 3 pod evictions",
        threshold(1, True),
        init_pods(),
        N1,
        3,
        maxNoOfPodsToEvictPerNamespace=3,
    ),
    case(
        "All pods have total restarts equals threshold(maxPodsToEvictPerNode=3) but the only other node is "
        "tainted, 0 pod evictions",
        threshold(1, True),
        init_pods(),
        [node("node1"), node("node2", taints("hardware=gpu:NoSchedule"))],
        0,
        maxNoOfPodsToEvictPerNode=3,
        nodeFit=True,
    ),
    case(
        "All pods have total restarts equals threshold(maxPodsToEvictPerNode=3) but the only other node is not "
        "schedulable, 0 pod evictions",
        threshold(1, True),
        init_pods(),
        [node("node1"), node("node3", ref.unschedulable)],
        0,
        maxNoOfPodsToEvictPerNode=3,
        nodeFit=True,
    ),
    case(
        "All pods have total restarts equals threshold(maxPodsToEvictPerNode=3) but the only other node does not "
        "have enough CPU, 0 pod evictions",
        threshold(1, True),
        init_pods(),
        [node("node1"), ref.node("node4", 200, 3000, 10)],
        0,
        maxNoOfPodsToEvictPerNode=3,
        nodeFit=True,
    ),
    case(
        "All pods have total restarts equals threshold(maxPodsToEvictPerNode=3) but the only other node has "
        "enough CPU, 3 pod evictions",
        threshold(1, True),
        init_pods(),
        [node("node1"), node("node5")],
        3,
        maxNoOfPodsToEvictPerNode=3,
        nodeFit=True,
    ),
    case(
        "pods are in CrashLoopBackOff with states=CrashLoopBackOff, 3 pod evictions",
        {"podRestartThreshold": 1, "states": ["CrashLoopBackOff"]},
        init_pods(crash_loop_first_container),
        [node("node1"), node("node5")],
        3,
        maxNoOfPodsToEvictPerNode=3,
        nodeFit=True,
    ),
    case(
        "pods without CrashLoopBackOff with states=CrashLoopBackOff, 0 pod evictions",
        {"podRestartThreshold": 1, "states": ["CrashLoopBackOff"]},
        init_pods(),
        [node("node1"), node("node5")],
        0,
        maxNoOfPodsToEvictPerNode=3,
        nodeFit=True,
    ),
    case(
        "pods running with state=Running, 3 pod evictions",
        {"podRestartThreshold": 1, "states": ["Running"]},
        init_pods(ref.phase("Running")),
        N1,
        3,
        maxNoOfPodsToEvictPerNode=3,
    ),
    case(
        "pods pending with state=Running, 0 pod evictions",
        {"podRestartThreshold": 1, "states": ["Running"]},
        init_pods(ref.phase("Pending")),
        N1,
        0,
        maxNoOfPodsToEvictPerNode=3,
    ),
    case(
        "pods pending with initContainer with states=CrashLoopBackOff threshold(includingInitContainers=true), "
        "3 pod evictions",
        {"podRestartThreshold": 1, "states": ["CrashLoopBackOff"], "includingInitContainers": True},
        init_pods(crash_loop_init),
        N1,
        3,
        maxNoOfPodsToEvictPerNode=3,
    ),
    case(
        "pods pending with initContainer with states=CrashLoopBackOff threshold(includingInitContainers=false), "
        "0 pod evictions",
        {
            "podRestartThreshold": 1,
            "states": ["CrashLoopBackOff"],
            "includingInitContainers": False,
        },
        init_pods(crash_loop_init),
        N1,
        0,
        maxNoOfPodsToEvictPerNode=3,
    ),
]


@pytest.mark.parametrize(("args", "nodes", "pods", "settings", "expect"), CASES)
def test_case(
    args: Mapping[str, Any],
    nodes: Sequence[objects.Node],
    pods: Sequence[objects.Pod],
    settings: Mapping[str, Any],
    expect: ref.Expect,
) -> None:
    """The row's number of evictions."""
    plugin = "RemovePodsHavingTooManyRestarts"
    ref.check(ref.evictions("deschedule", plugin, args, nodes, pods, settings, spare=True), expect)


ALL = (CASES,)
