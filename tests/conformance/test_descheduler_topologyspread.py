"""kubernetes-sigs/descheduler RemovePodsViolatingTopologySpreadConstraint, case by case.

Source: kubernetes-sigs/descheduler
`pkg/framework/plugins/removepodsviolatingtopologyspreadconstraint/topologyspreadconstraint_test.go`
(TestTopologySpreadConstraint). `createTestPods` numbers pods pod-0, pod-1, ...
in namespace ns1, 100m each, owned by a ReplicaSet unless `noOwners`; a
"default constraint" is maxSkew N on `zone` (DoNotSchedule) selecting
`foo=bar`. Args are defaulted as upstream (constraints [DoNotSchedule],
topologyBalanceNodeFit true); DefaultEvictor `nodeFit` as the row sets it; no
caps. Rows count evictions and, where they list them, which pods.

Most rows put the constraint on one pod and count its siblings (same labels,
no constraint) in the domains; nodeqos moves only pods that carry the
constraint (`constraint-carriers-only` in docs/deviations.md), so those rows
differ on purpose.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from kube import objects
from tests.conformance import reference as ref
from tests.conformance.reference import differs, same, taints

TITLE = "descheduler RemovePodsViolatingTopologySpreadConstraint"
FILE = (
    "kubernetes-sigs/descheduler pkg/framework/plugins/"
    "removepodsviolatingtopologyspreadconstraint/topologyspreadconstraint_test.go"
)
TEST = "TestTopologySpreadConstraint"
FOO_BAR = {"foo": "bar"}
HASH = "pod-template-hash"


def constraint(
    max_skew: int = 1,
    key: str = "zone",
    when: str = "DoNotSchedule",
    selector: Mapping[str, str] = FOO_BAR,
    **extra: Any,
) -> dict[str, Any]:
    """One TopologySpreadConstraint (`getDefaultTopologyConstraints` with the defaults)."""
    return {
        "maxSkew": max_skew,
        "topologyKey": key,
        "whenUnsatisfiable": when,
        "labelSelector": {"matchLabels": dict(selector)},
        **extra,
    }


DEFAULT = [constraint()]


@dataclass(frozen=True)
class Group:
    """One `testPodList` entry: `count` alike pods on `node`."""

    count: int
    node: str
    constraints: Sequence[Mapping[str, Any]] = ()
    labels: Mapping[str, str] = field(default_factory=lambda: dict(FOO_BAR))
    node_selector: Mapping[str, str] | None = None
    affinity: Mapping[str, Any] | None = None
    tolerations: Sequence[Mapping[str, Any]] = ()
    no_owners: bool = False
    deleting: bool = False


def pods(*groups: Group) -> list[objects.Pod]:
    """`createTestPods`."""
    found, number = [], 0
    for g in groups:
        for _ in range(g.count):
            setters: list[Any] = [ref.namespace("ns1"), ref.labels(**g.labels)]
            if not g.no_owners:
                setters.append(ref.rs_owner)
            spec: dict[str, Any] = {}
            if g.constraints:
                spec["topologySpreadConstraints"] = [dict(c) for c in g.constraints]
            if g.node_selector:
                spec["nodeSelector"] = dict(g.node_selector)
            if g.affinity:
                spec["affinity"] = dict(g.affinity)
            if g.tolerations:
                spec["tolerations"] = [dict(t) for t in g.tolerations]
            setters.append(ref.spec(**spec))
            if g.deleting:
                setters.append(ref.terminating)
            found.append(ref.pod(f"pod-{number}", 100, 0, g.node, *setters))
            number += 1
    return found


def node(
    name: str, *setters: Any, cpu: int = 2000, memory: int = 3000, pods_: int = 10, **labels: str
) -> objects.Node:
    return ref.node(name, cpu, memory, pods_, ref.node_labels(**labels), *setters)


def zones(*names: str, cpu: int = 2000) -> list[objects.Node]:
    """n1, n2, ... in zoneA, zoneB, ... (`n.Labels["zone"] = ...`)."""
    return [node(f"n{i + 1}", cpu=cpu, zone=z) for i, z in enumerate(names)]


AB = zones("zoneA", "zoneB")
ABC = zones("zoneA", "zoneB", "zoneC")
LIN_WIN = [
    node(f"n{i + 1}", node=name, os=os)
    for i, (name, os) in enumerate(
        [
            ("linNodeA", "linux"),
            ("linNodeB", "linux"),
            ("linNodeC", "linux"),
            ("winNodeA", "windows"),
            ("winNodeB", "windows"),
            ("winNodeC", "windows"),
        ]
    )
]
NODE_CONSTRAINT = [constraint(key="node")]
WINDOWS = {"os": "windows"}
TAINT_TEST = {"key": "taint-test", "value": "test", "effect": "NoSchedule"}


def required(*expressions: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [dict(e) for e in expressions]}]
            }
        }
    }


def selector(key: str, values: Sequence[str], operator: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": operator, "values": list(values)}]}


def case(
    name: str,
    nodes: Sequence[objects.Node],
    the_pods: Sequence[objects.Pod],
    expect: ref.Expect,
    args: Mapping[str, Any] | None = None,
    *,
    node_fit: bool = False,
) -> Any:
    return pytest.param(nodes, the_pods, dict(args or {}), node_fit, expect, id=f"{TEST}/{name}")


WHOAMI = {"app": "whoami"}
WHOAMI_CONSTRAINTS = [
    constraint(key="topology.kubernetes.io/zone", when="ScheduleAnyway", selector=WHOAMI),
    constraint(key="kubernetes.io/hostname", selector=WHOAMI),
]
BOTH_ACTIONS = {"constraints": ["DoNotSchedule", "ScheduleAnyway"]}
SERVICE = {"app.kubernetes.io/name": "service"}
APP_SERVICE_AFFINITY = required({"key": "app_service", "operator": "Exists"})
ARCH = "kubernetes.io/arch"

CASES = [
    case(
        "2 domains, sizes [2,1], maxSkew=1, move 0 pods",
        AB,
        pods(Group(1, "n1", DEFAULT), Group(1, "n1"), Group(1, "n2")),
        same(0),
    ),
    case(
        "2 domains, sizes [3,1], maxSkew=1, move 1 pod to achieve [2,2]",
        AB,
        pods(Group(1, "n1", DEFAULT), Group(2, "n1"), Group(1, "n2")),
        same(1),
    ),
    case(
        "2 domains, sizes [3,1], maxSkew=1, move 1 pod to achieve [2,2] (both constraints)",
        AB,
        pods(Group(1, "n1", [constraint(when="ScheduleAnyway")]), Group(2, "n1"), Group(1, "n2")),
        same(1),
        BOTH_ACTIONS,
    ),
    case(
        "2 domains, sizes [3,1], maxSkew=1, move 1 pod to achieve [2,2] (soft constraints)",
        AB,
        pods(Group(1, "n1", [constraint(when="ScheduleAnyway")]), Group(2, "n1"), Group(1, "n2")),
        same(1),
        BOTH_ACTIONS,
    ),
    case(
        "2 domains, sizes [3,1], maxSkew=1, no pods eligible, move 0 pods",
        AB,
        pods(
            Group(1, "n1", DEFAULT, no_owners=True),
            Group(2, "n1", no_owners=True),
            Group(1, "n2", no_owners=True),
        ),
        same(0),
    ),
    case(
        "2 domains, sizes [3,1], maxSkew=1, move 1 pod to achieve [2,2], exclude kube-system namespace",
        AB,
        pods(Group(1, "n1", DEFAULT), Group(2, "n1"), Group(1, "n2")),
        same(1),
        {"namespaces": {"exclude": ["kube-system"]}},
        node_fit=True,
    ),
    case(
        "2 domains, sizes [5,2], maxSkew=1, move 1 pod to achieve [4,3]",
        AB,
        pods(Group(1, "n1", DEFAULT), Group(4, "n1"), Group(2, "n2")),
        same(1),
    ),
    case(
        "2 domains, sizes [4,0], maxSkew=1, move 2 pods to achieve [2,2]",
        AB,
        pods(Group(1, "n1", DEFAULT), Group(3, "n1")),
        differs(2, 1, "constraint-carriers-only"),
    ),
    case(
        "2 domains, sizes [4,0], maxSkew=1, only move 1 pod since pods with nodeSelector and nodeAffinity aren't "
        "evicted",
        AB,
        pods(
            Group(1, "n1", DEFAULT, node_selector={"zone": "zoneA"}),
            Group(1, "n1", DEFAULT, node_selector={"zone": "zoneA"}),
            Group(
                1,
                "n1",
                DEFAULT,
                affinity=required({"key": "foo", "operator": "In", "values": ["bar"]}),
            ),
            Group(1, "n1", DEFAULT),
        ),
        same(1),
        node_fit=True,
    ),
    case(
        "6 domains, sizes [0,0,0,3,3,2], maxSkew=1, No pod is evicted since topology is balanced",
        LIN_WIN,
        pods(
            Group(3, "n4", NODE_CONSTRAINT, node_selector=WINDOWS),
            Group(3, "n5", NODE_CONSTRAINT, node_selector=WINDOWS),
            Group(2, "n6", NODE_CONSTRAINT, node_selector=WINDOWS),
        ),
        same(0),
    ),
    case(
        "7 domains, sizes [0,0,0,3,3,2], maxSkew=1, two pods are evicted and moved to new node added",
        [*LIN_WIN, node("n7", node="winNodeD", os="windows")],
        pods(
            Group(3, "n4", NODE_CONSTRAINT, node_selector=WINDOWS),
            Group(3, "n5", NODE_CONSTRAINT, node_selector=WINDOWS),
            Group(2, "n6", NODE_CONSTRAINT, node_selector=WINDOWS),
        ),
        same(2),
    ),
    case(
        "6 domains, sizes [0,0,0,4,3,1], maxSkew=1, 1 pod is evicted from node 4",
        LIN_WIN,
        pods(
            Group(4, "n4", NODE_CONSTRAINT, node_selector=WINDOWS),
            Group(3, "n5", NODE_CONSTRAINT, node_selector=WINDOWS),
            Group(1, "n6", NODE_CONSTRAINT, node_selector=WINDOWS),
        ),
        same(1),
    ),
    case(
        "6 domains, sizes [0,0,0,4,3,1], maxSkew=1, 0 pod is evicted as pods of node:winNodeA can only be "
        "scheduled on this node and nodeFit is true ",
        LIN_WIN,
        pods(
            Group(4, "n4", NODE_CONSTRAINT, node_selector={"node": "winNodeA"}),
            Group(3, "n5", NODE_CONSTRAINT, node_selector=WINDOWS),
            Group(1, "n6", NODE_CONSTRAINT, node_selector=WINDOWS),
        ),
        differs(0, 1, "one-move-at-a-time"),
        node_fit=True,
    ),
    case(
        "2 domains, sizes [4,0], maxSkew=1, move 2 pods since selector matches multiple nodes",
        [node("n1", zone="zoneA", region="boston"), node("n2", zone="zoneB", region="boston")],
        pods(
            Group(1, "n1", DEFAULT, node_selector={"region": "boston"}),
            *(Group(1, "n1", node_selector={"region": "boston"}) for _ in range(3)),
        ),
        differs(2, 1, "constraint-carriers-only"),
    ),
    case(
        "3 domains, sizes [0, 1, 100], maxSkew=1, move 66 pods to get [34, 33, 34]",
        ABC,
        pods(Group(1, "n2", DEFAULT), Group(100, "n3")),
        differs(66, 0, "constraint-carriers-only"),
    ),
    case(
        "4 domains, sizes [0, 1, 3, 5], should move 3 to get [2, 2, 3, 2]",
        zones("zoneA", "zoneB", "zoneC", "zoneD"),
        pods(Group(1, "n2", DEFAULT), Group(3, "n3"), Group(5, "n4")),
        differs(3, 0, "constraint-carriers-only"),
    ),
    case(
        "2 domains size [2 6], maxSkew=2, should move 1 to get [3 5]",
        AB,
        pods(Group(1, "n1", [constraint(2)]), Group(1, "n1"), Group(6, "n2")),
        differs(1, 0, "constraint-carriers-only"),
    ),
    case(
        "2 domains size [2 6], maxSkew=2, can't move any because of node taints",
        [node("n1", taints("hardware=gpu:NoSchedule"), zone="zoneA"), node("n2", zone="zoneB")],
        pods(Group(1, "n1", [constraint(2)]), Group(1, "n1"), Group(6, "n2")),
        same(0),
        node_fit=True,
    ),
    case(
        "2 domains size [2 6], maxSkew=2, can't move any because node1 does not have enough CPU",
        [node("n1", cpu=200, zone="zoneA"), node("n2", zone="zoneB")],
        pods(Group(1, "n1", [constraint(2)]), Group(1, "n1"), Group(6, "n2")),
        same(0),
        node_fit=True,
    ),
    case(
        "Multiple constraints (6 nodes/2 zones, 4 pods)",
        [
            ref.node(
                f"n{i}",
                2000,
                3000,
                10,
                ref.node_labels(**{"topology.kubernetes.io/zone": "zoneA" if i <= 3 else "zoneB"}),
            )
            for i in range(1, 7)
        ],
        pods(*(Group(1, f"n{i}", WHOAMI_CONSTRAINTS, labels=WHOAMI) for i in range(1, 5))),
        same(1),
        BOTH_ACTIONS,
    ),
    case(
        "3 domains size [8 7 0], maxSkew=1, should move 5 to get [5 5 5]",
        ABC,
        pods(Group(8, "n1", DEFAULT), Group(7, "n2", DEFAULT)),
        differs(
            ("pod-5", "pod-6", "pod-7", "pod-8", "pod-9"),
            ("pod-0", "pod-1", "pod-10", "pod-11", "pod-2"),
            "tie-order",
        ),
    ),
    case(
        "3 domains size [5 5 5], maxSkew=1, should move 0 to retain [5 5 5]",
        ABC,
        pods(Group(5, "n1", DEFAULT), Group(5, "n2", DEFAULT), Group(5, "n3", DEFAULT)),
        same(0),
    ),
    case(
        "2 domains, sizes [2,0], maxSkew=1, move 1 pod since pod tolerates the node with taint",
        [node("n1", zone="zoneA"), node("n2", taints(TAINT_TEST), zone="zoneB")],
        pods(
            Group(1, "n1", DEFAULT, tolerations=[{**TAINT_TEST, "operator": "Equal"}]),
            Group(1, "n1", node_selector={"zone": "zoneA"}),
        ),
        same(("pod-0",)),
    ),
    case(
        "2 domains, sizes [2,0], maxSkew=1, move 0 pods since pod does not tolerate the tainted node",
        [node("n1", zone="zoneA"), node("n2", taints(TAINT_TEST), zone="zoneB")],
        pods(Group(1, "n1", DEFAULT), Group(1, "n1", node_selector={"zone": "zoneA"})),
        same(0),
    ),
    case(
        "2 domains, sizes [2,0], maxSkew=1, move 0 pods since pod does not tolerate the tainted node, and NodeFit "
        "is enabled",
        [node("n1", zone="zoneA"), node("n2", taints(TAINT_TEST), zone="zoneB")],
        pods(Group(1, "n1", DEFAULT), Group(1, "n1", node_selector={"zone": "zoneA"})),
        same(0),
        node_fit=True,
    ),
    case(
        "2 domains, sizes [2,0], maxSkew=1, move 1 pod for node with PreferNoSchedule Taint",
        [
            node("n1", zone="zoneA"),
            node("n2", taints({**TAINT_TEST, "effect": "PreferNoSchedule"}), zone="zoneB"),
        ],
        pods(Group(1, "n1", DEFAULT), Group(1, "n1", node_selector={"zone": "zoneA"})),
        same(("pod-0",)),
    ),
    case(
        "2 domains, sizes [2,0], maxSkew=1, move 0 pod for node with unmatched label filtering",
        AB,
        pods(Group(1, "n1", DEFAULT), Group(1, "n1")),
        same(0),
        {"labelSelector": selector("foo", ["baz"], "In")},
    ),
    case(
        "2 domains, sizes [2,0], maxSkew=1, move 1 pod for node with matched label filtering",
        AB,
        pods(Group(1, "n1", DEFAULT), Group(1, "n1")),
        differs(("pod-1",), ("pod-0",), "constraint-carriers-only"),
        {"labelSelector": selector("foo", ["bar"], "In")},
    ),
    case(
        "2 domains, sizes [2,0], maxSkew=1, move 1 pod for node with matched label filtering (NotIn op)",
        AB,
        pods(Group(1, "n1", DEFAULT), Group(1, "n1")),
        differs(("pod-1",), ("pod-0",), "constraint-carriers-only"),
        {"labelSelector": selector("foo", ["baz"], "NotIn")},
    ),
    case(
        "2 domains, sizes [2,0], maxSkew=1, move 1 pods given matchLabelKeys on same replicaset",
        AB,
        pods(
            *(
                Group(1, "n1", [constraint(matchLabelKeys=[HASH])], labels={**FOO_BAR, HASH: "foo"})
                for _ in range(2)
            )
        ),
        differs(("pod-1",), ("pod-0",), "tie-order"),
        {"labelSelector": selector("foo", ["baz"], "NotIn")},
    ),
    case(
        "2 domains, sizes [2,0], maxSkew=1, move 0 pods given matchLabelKeys on two different replicasets",
        AB,
        pods(
            Group(1, "n1", [constraint(matchLabelKeys=[HASH])], labels={**FOO_BAR, HASH: "foo"}),
            Group(1, "n1", [constraint(matchLabelKeys=[HASH])], labels={**FOO_BAR, HASH: "bar"}),
        ),
        same(0),
        {"labelSelector": selector("foo", ["baz"], "NotIn")},
    ),
    case(
        "2 domains, sizes [4,2], maxSkew=1, 2 pods in termination; nothing should be moved",
        AB,
        pods(
            Group(2, "n1", DEFAULT), Group(2, "n1", DEFAULT, deleting=True), Group(2, "n2", DEFAULT)
        ),
        same(0),
        {"labelSelector": selector("foo", ["bar"], "In")},
    ),
    case(
        "3 domains, sizes [2,3,4], maxSkew=1, NodeFit is enabled, and not enough cpu on zoneA; nothing should be "
        "moved",
        [
            node("n1", cpu=250, memory=2000, pods_=9, zone="zoneA"),
            node("n2", cpu=1000, memory=2000, pods_=9, zone="zoneB"),
            node("n3", cpu=1000, memory=2000, pods_=9, zone="zoneC"),
        ],
        pods(Group(2, "n1", DEFAULT), Group(3, "n2", DEFAULT), Group(4, "n3", DEFAULT)),
        same(0),
        node_fit=True,
    ),
    case(
        "3 domains, sizes [2,3,4], maxSkew=1, args.NodeFit is false, and not enough cpu on zoneA; 1 should be "
        "moved to force scale-up",
        [
            node("n1", cpu=250, memory=2000, pods_=9, zone="zoneA"),
            node("n2", cpu=1000, memory=2000, pods_=9, zone="zoneB"),
            node("n3", cpu=1000, memory=2000, pods_=9, zone="zoneC"),
        ],
        pods(Group(2, "n1", DEFAULT), Group(3, "n2", DEFAULT), Group(4, "n3", DEFAULT)),
        same(1),
        {"topologyBalanceNodeFit": False},
        node_fit=True,
    ),
    case(
        "3 domains, sizes [[1,0], [1,1], [2,1]], maxSkew=1, NodeFit is enabled, and not enough cpu on ZoneA; "
        "nothing should be moved",
        [
            node("A1", cpu=150, memory=2000, pods_=9, zone="zoneA"),
            node("B1", cpu=1000, memory=2000, pods_=9, zone="zoneB"),
            node("C1", cpu=1000, memory=2000, pods_=9, zone="zoneC"),
            node("A2", cpu=50, memory=2000, pods_=9, zone="zoneA"),
            node("B2", cpu=1000, memory=2000, pods_=9, zone="zoneB"),
            node("C2", cpu=1000, memory=2000, pods_=9, zone="zoneC"),
        ],
        pods(
            Group(1, "A1", DEFAULT),
            Group(1, "B1", DEFAULT),
            Group(1, "B2", DEFAULT),
            Group(2, "C1", DEFAULT),
            Group(1, "C2", DEFAULT),
        ),
        same(0),
        node_fit=True,
    ),
    case(
        "2 domains, sizes [[1,4], [2,1]], maxSkew=1, NodeFit is enabled; should move 1",
        [
            node("A1", cpu=1000, memory=2000, pods_=9, zone="zoneA"),
            node("A2", cpu=1000, memory=2000, pods_=9, zone="zoneA"),
            node("B1", cpu=1000, memory=2000, pods_=9, zone="zoneB"),
            node("B2", cpu=1000, memory=2000, pods_=9, zone="zoneB"),
        ],
        pods(
            Group(1, "A1", DEFAULT),
            Group(4, "A2", DEFAULT),
            Group(2, "B1", DEFAULT),
            Group(1, "B2", DEFAULT),
        ),
        differs(("pod-4",), ("pod-0",), "tie-order"),
        node_fit=True,
    ),
    case(
        "2 domains, sizes [3, 1], maxSkew=1, Tainted nodes; nothing should be moved",
        [
            node(
                "controlplane1",
                taints(
                    "node-role.kubernetes.io/controlplane=true:NoSchedule",
                    "node-role.kubernetes.io/etcd=true:NoSchedule",
                ),
                zone="zoneA",
                **{"kubernetes.io/hostname": "cp-1"},
            ),
            node(
                "infraservices1",
                taints("infra_service:NoSchedule"),
                zone="zoneA",
                infra_service="true",
                **{"kubernetes.io/hostname": "infra-1"},
            ),
            node("app1", zone="zoneA", app_service="true", **{"kubernetes.io/hostname": "app-1"}),
            node("app2", zone="zoneB", app_service="true", **{"kubernetes.io/hostname": "app-2"}),
        ],
        pods(
            Group(
                2,
                "app1",
                [constraint(key="kubernetes.io/hostname", selector=SERVICE)],
                labels=SERVICE,
                affinity=APP_SERVICE_AFFINITY,
            ),
            Group(
                2,
                "app2",
                [constraint(key="kubernetes.io/hostname", selector=SERVICE)],
                labels=SERVICE,
                affinity=APP_SERVICE_AFFINITY,
            ),
        ),
        same(0),
        node_fit=True,
    ),
    case(
        "3 domains, sizes [2, 1, 0] with selectors, maxSkew=1, nodeTaintsPolicy=Ignore, should move 1 for "
        "[1, 1, 1]",
        [
            node(name, cpu=1000, memory=2000, pods_=9, zone=zone, **{ARCH: "arm64"})
            for name, zone in (("A1", "zoneA"), ("B1", "zoneB"), ("C1", "zoneC"))
        ],
        pods(
            Group(
                1, "A1", [constraint(nodeAffinityPolicy="Ignore")], node_selector={ARCH: "arm64"}
            ),
            Group(
                1,
                "A1",
                [constraint(nodeAffinityPolicy="Ignore")],
                node_selector={"zone": "zoneA", ARCH: "arm64"},
            ),
            Group(
                1, "B1", [constraint(nodeAffinityPolicy="Ignore")], node_selector={ARCH: "arm64"}
            ),
        ),
        same(("pod-0",)),
    ),
]


@pytest.mark.parametrize(("nodes", "the_pods", "args", "node_fit", "expect"), CASES)
def test_case(
    nodes: Sequence[objects.Node],
    the_pods: Sequence[objects.Pod],
    args: Mapping[str, Any],
    node_fit: bool,
    expect: ref.Expect,
) -> None:
    """The row's number of evictions (and which pods, where the row lists them)."""
    plugin = "RemovePodsViolatingTopologySpreadConstraint"
    settings = {"nodeFit": node_fit}
    ref.check(ref.evictions("balance", plugin, args, nodes, the_pods, settings), expect)


ALL = (CASES,)
