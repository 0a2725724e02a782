"""kubernetes-sigs/descheduler RemoveDuplicates, case by case from its test tables.

Source: kubernetes-sigs/descheduler
`pkg/framework/plugins/removeduplicates/removeduplicates_test.go`
(TestFindDuplicatePods with DefaultEvictor `nodeFit` as the row sets it,
TestRemoveDuplicatesUniformly with zero-value DefaultEvictor args). Rows count
evictions; no caps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from kube import objects
from tests.conformance import reference as ref
from tests.conformance.reference import (
    critical,
    differs,
    ds_owner,
    local_storage,
    mirror,
    namespace,
    node_labels,
    owners,
    pod_owner,
    rs_owner,
    same,
    spec,
    taints,
    unschedulable,
)

TITLE = "descheduler RemoveDuplicates"
FILE = "kubernetes-sigs/descheduler pkg/framework/plugins/removeduplicates/removeduplicates_test.go"
FIND, UNIFORMLY = "TestFindDuplicatePods", "TestRemoveDuplicatesUniformly"


def node(name: str, *setters: Any) -> objects.Node:
    return ref.node(name, 2000, 3000, 10, *setters)


def pod(name: str, node_name: str, *setters: Any) -> objects.Pod:
    """`buildTestPodForNode`: 100m, no owner."""
    return ref.pod(name, 100, 0, node_name, *setters)


def rs(name: str, ns: str, *setters: Any) -> objects.Pod:
    """`buildTestPodWithRSOwnerRefWithNamespaceForNode1`."""
    return pod(name, "n1", rs_owner, namespace(ns), *setters)


def image(value: str) -> Any:
    def set_image(raw: dict[str, Any]) -> None:
        raw["spec"]["containers"][0]["image"] = value

    return set_image


def add_container(name: str, value: str) -> Any:
    def add(raw: dict[str, Any]) -> None:
        raw["spec"]["containers"].append({"name": name, "image": value})

    return add


def with_image(name: str, value: str) -> objects.Pod:
    """`buildTestPodWithImage`: an RS pod on n1 with a second container of that image."""
    return pod(name, "n1", rs_owner, add_container(value, value))


N1_N2 = [node("n1"), node("n2")]
DEV3 = [rs("p1", "dev"), rs("p2", "dev"), rs("p3", "dev")]
TEST3 = [rs("p8", "test"), rs("p9", "test"), rs("p10", "test")]
PROTECTED = [
    pod("p4", "n1", ds_owner),
    pod("p5", "n1", pod_owner, local_storage),
    pod("p6", "n1", mirror),
    pod("p7", "n1", critical),
]


def find(
    name: str,
    nodes: Sequence[objects.Node],
    pods: Sequence[objects.Pod],
    expect: ref.Expect,
    **settings: Any,
) -> Any:
    return pytest.param(nodes, pods, settings, expect, id=f"{FIND}/{name}")


def west(raw: dict[str, Any]) -> None:
    raw["spec"]["nodeSelector"] = {"datacenter": "west"}


FIND_CASES = [
    find(
        "Three pods in the `dev` Namespace, bound to same ReplicaSet. 1 should be evicted.",
        N1_N2,
        DEV3,
        same(1),
    ),
    find(
        "Three pods in the `dev` Namespace, bound to same ReplicaSet, but ReplicaSet kind is excluded. "
        "0 should be evicted.",
        N1_N2,
        DEV3,
        same(0),
        excludeOwnerKinds=["ReplicaSet"],
    ),
    find(
        "Three Pods in the `test` Namespace, bound to same ReplicaSet. 1 should be evicted.",
        N1_N2,
        TEST3,
        same(1),
    ),
    find(
        "Three Pods in the `dev` Namespace, three Pods in the `test` Namespace. Bound to ReplicaSet with same "
        "name. 4 should be evicted.",
        N1_N2,
        [*DEV3, *TEST3],
        same(2),
    ),
    find(
        "Pods are: part of DaemonSet, with local storage, mirror pod annotation, critical pod annotation - none "
        "should be evicted.",
        N1_N2,
        PROTECTED,
        same(0),
    ),
    find("Test all Pods: 4 should be evicted.", N1_N2, [*DEV3, *PROTECTED, *TEST3], same(2)),
    find(
        "Pods with the same owner but different images should not be evicted",
        N1_N2,
        [rs("p11", "different-images", image("foo")), rs("p12", "different-images", image("bar"))],
        same(0),
    ),
    find(
        "Pods with multiple containers should not match themselves",
        N1_N2,
        [rs("p13", "different-images", add_container("foo", "foo"))],
        same(0),
    ),
    find(
        "Pods with matching ownerrefs and at not all matching image should not trigger an eviction",
        N1_N2,
        [
            rs("p11", "different-images", image("foo")),
            rs("p13", "different-images", add_container("foo", "foo")),
        ],
        same(0),
    ),
    find(
        "Three pods in the `dev` Namespace, bound to same ReplicaSet. Only node available has a taint, and "
        "nodeFit set to true. 0 should be evicted.",
        [node("n1"), node("n3", taints("hardware=gpu:NoSchedule"))],
        DEV3,
        same(0),
        nodeFit=True,
    ),
    find(
        "Three pods in the `node-fit` Namespace, bound to same ReplicaSet, all with a nodeSelector. Only node "
        "available has an incorrect node label, and nodeFit set to true. 0 should be evicted.",
        [node("n1"), node("n4", node_labels(datacenter="east"))],
        [rs("p15", "node-fit", west), rs("NOT1", "node-fit", west), rs("NOT2", "node-fit", west)],
        same(0),
        nodeFit=True,
    ),
    find(
        "Three pods in the `node-fit` Namespace, bound to same ReplicaSet. Only node available is not "
        "schedulable, and nodeFit set to true. 0 should be evicted.",
        [node("n1"), node("n5", unschedulable)],
        DEV3,
        same(0),
        nodeFit=True,
    ),
    find(
        "Three pods in the `node-fit` Namespace, bound to same ReplicaSet. Only node available does not have "
        "enough CPU, and nodeFit set to true. 0 should be evicted.",
        [node("n1"), ref.node("n6", 200, 200, 10)],
        [*DEV3, ref.pod("CPU-eater", 150, 150, "n6", namespace("test"))],
        same(0),
        nodeFit=True,
    ),
    find(
        "Three pods in the `node-fit` Namespace, bound to same ReplicaSet. Only node available has enough CPU, "
        "and nodeFit set to true. 1 should be evicted.",
        [node("n1"), ref.node("n6", 200, 200, 10)],
        [*DEV3, ref.pod("CPU-saver", 100, 150, "n6", namespace("test"))],
        same(1),
        nodeFit=True,
    ),
]

RS2 = owners(("ReplicaSet", "replicaset-2", ""))
TWO_RS = owners(("ReplicaSet", "replicaset-1", ""), ("ReplicaSet", "replicaset-2", ""))


def spread(
    owner: Any,
    counts: tuple[int, int, int],
    first: int = 1,
    names: Sequence[str] = ("n1", "n2", "n3"),
) -> list[objects.Pod]:
    """counts[i] pods of `owner` on names[i], named p<first>, p<first+1>, ..."""
    pods, i = [], first
    for node_name, count in zip(names, counts, strict=True):
        for _ in range(count):
            pods.append(pod(f"p{i}", node_name, owner))
            i += 1
    return pods


def tolerating(key: str, value: str) -> Any:
    return spec(
        tolerations=[{"key": key, "value": value, "operator": "Equal", "effect": "NoSchedule"}]
    )


def not_master(key: str) -> Any:
    return spec(
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "node-role.kubernetes.io/control-plane",
                                    "operator": "DoesNotExist",
                                },
                                {"key": key, "operator": "DoesNotExist"},
                            ]
                        }
                    ]
                }
            }
        }
    )


def worker_selector(value: str) -> Any:
    return spec(nodeSelector={"node-role.kubernetes.io/worker": value})


WORKERS = ("worker1", "worker2", "worker3")
KEYS = ("k1", "k2", "k1", "k2", "k1", "k2", "k1", "k2", "k1")


def workers_pods(setter: Any) -> list[objects.Pod]:
    """(5,3,1) over worker1-3, alternating k1/k2 as the rows do."""
    where = ["worker1"] * 5 + ["worker2"] * 3 + ["worker3"]
    return [
        pod(f"p{i + 1}", w, rs_owner, setter(k))
        for i, (w, k) in enumerate(zip(where, KEYS, strict=True))
    ]


def six(workers: Any = (), masters: Any = ()) -> list[objects.Node]:
    return [node(w, *workers) for w in WORKERS] + [node(f"master{i}", *masters) for i in (1, 2, 3)]


# setWorkerLabel sets worker=k1 and then worker=k2: every worker ends up labelled k2.
WORKER_LABEL = node_labels(**{"node-role.kubernetes.io/worker": "k2"})
CONTROL_PLANE_TAINT = taints(
    {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
)
CONTROL_PLANE_LABEL = node_labels(**{"node-role.kubernetes.io/control-plane": ""})


def uniformly(
    name: str, nodes: Sequence[objects.Node], pods: Sequence[objects.Pod], expect: ref.Expect
) -> Any:
    return pytest.param(nodes, pods, {"nodeFit": False}, expect, id=f"{UNIFORMLY}/{name}")


NODES3 = [node("n1"), node("n2"), node("n3")]
UNIFORM_CASES = [
    uniformly("Evict pods uniformly", NODES3, spread(rs_owner, (5, 3, 1)), same(2)),
    uniformly(
        "Evict pods uniformly with one node left out",
        NODES3[:2],
        spread(rs_owner, (5, 3, 1)),
        same(1),
    ),
    uniformly(
        "Evict pods uniformly with two replica sets",
        NODES3,
        spread(TWO_RS, (5, 3, 1), first=11),
        # Each pod has two owner references. The reference counts an eviction per
        # owner reference, so each of its 2 pods is evicted twice; nodeqos groups a pod
        # by all its owners together and evicts each pod at most once.
        differs(4, 2, "one-eviction-per-pod"),
    ),
    uniformly(
        "Evict pods uniformly with two owner references",
        NODES3,
        [*spread(rs_owner, (5, 3, 1), first=11), *spread(RS2, (1, 3, 5), first=21)],
        same(4),
    ),
    uniformly(
        "Evict pods with number of pods less than nodes",
        NODES3,
        spread(rs_owner, (2, 0, 0)),
        same(1),
    ),
    uniformly(
        "Evict pods with number of pods less than nodes, but ignore different pods with the same ownerref",
        NODES3,
        [
            with_image("p1", "foo"),
            with_image("p2", "bar"),
            with_image("p3", "baz"),
            with_image("p4", "foo"),
        ],
        same(1),
    ),
    uniformly(
        "Evict pods with a single pod with three nodes",
        NODES3,
        spread(rs_owner, (1, 0, 0)),
        same(0),
    ),
    uniformly(
        "Evict pods uniformly respecting taints",
        six(masters=(CONTROL_PLANE_TAINT,)),
        workers_pods(lambda k: tolerating(k, "v" + k[1])),
        same(2),
    ),
    uniformly(
        "Evict pods uniformly respecting RequiredDuringSchedulingIgnoredDuringExecution node affinity",
        six(masters=(CONTROL_PLANE_LABEL,)),
        workers_pods(not_master),
        same(2),
    ),
    uniformly(
        "Evict pods uniformly respecting node selector",
        six(workers=(WORKER_LABEL,)),
        workers_pods(worker_selector),
        same(2),
    ),
    uniformly(
        "Evict pods uniformly respecting node selector with zero target nodes",
        six(),
        workers_pods(worker_selector),
        same(0),
    ),
]


@pytest.mark.parametrize(("nodes", "pods", "settings", "expect"), [*FIND_CASES, *UNIFORM_CASES])
def test_case(
    nodes: Sequence[objects.Node],
    pods: Sequence[objects.Pod],
    settings: Mapping[str, Any],
    expect: ref.Expect,
) -> None:
    """The row's number of evictions."""
    args = {k: v for k, v in settings.items() if k != "nodeFit"}
    evictor = {k: v for k, v in settings.items() if k == "nodeFit"}
    ref.check(ref.evictions("balance", "RemoveDuplicates", args, nodes, pods, evictor), expect)


ALL = (FIND_CASES, UNIFORM_CASES)
