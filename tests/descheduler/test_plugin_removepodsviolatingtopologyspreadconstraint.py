"""RemovePodsViolatingTopologySpreadConstraint: balanced by every constraint at once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from descheduler.framework import CycleReport
from descheduler.plugins.removepodsviolatingtopologyspreadconstraint import spread
from kube import objects
from tests import builders
from tests.descheduler import fakes

NAME = "RemovePodsViolatingTopologySpreadConstraint"
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
APP = {"app": "web"}
TAINT = "dedicated=db:NoSchedule"


def constraint(
    key: str = ZONE, *, skew: int = 1, when: str = "DoNotSchedule", **extra: Any
) -> dict[str, Any]:
    return {
        "maxSkew": skew,
        "topologyKey": key,
        "whenUnsatisfiable": when,
        "labelSelector": {"matchLabels": APP},
        **extra,
    }


def zone_nodes(layout: dict[str, str] | None = None, **overrides: Any) -> list[objects.Node]:
    """Nodes a1, a2 in zone z1 and b1 in z2 unless `layout` (node -> zone) says otherwise."""
    layout = layout or {"a1": "z1", "a2": "z1", "b1": "z2"}
    nodes = []
    for name, zone in layout.items():
        extra = dict(overrides.get(name, {}))
        labels = {ZONE: zone, **extra.pop("labels", {})}
        nodes.append(builders.make_node(name, labels=labels, **extra))
    return nodes


def web(
    placement: dict[str, int],
    constraints: Sequence[dict[str, Any]] | None = None,
    *,
    prefix: str = "web",
    **overrides: Any,
) -> list[objects.Pod]:
    """`placement[node]` pods of one ReplicaSet per node, labelled app=web, named prefix-<i>."""
    spreads = [constraint()] if constraints is None else list(constraints)
    labels = overrides.pop("labels", APP)
    pods: list[objects.Pod] = []
    for node, count in placement.items():
        for _ in range(count):
            pods.append(
                builders.make_pod(
                    f"{prefix}-{len(pods)}",
                    node=node,
                    owner_name=prefix,
                    labels=labels,
                    topology_spread=spreads,
                    **overrides,
                )
            )
    return pods


def run(
    pods: Sequence[objects.Pod],
    nodes: Sequence[objects.Node] | None = None,
    *,
    args: dict[str, Any] | None = None,
    **top: Any,
) -> CycleReport:
    """One cycle with the plugin as the only balance plugin."""
    return fakes.run_plugin(
        NAME, args, pods, point="balance", nodes=zone_nodes() if nodes is None else nodes, **top
    )


def skips(report: CycleReport) -> list[tuple[str, str]]:
    return [(s.pod, s.reason_code.value) for s in report.skipped]


def hog(node: str) -> objects.Pod:
    """A pod of another app that leaves `node` no room for a 100m pod."""
    return builders.make_pod(f"hog-{node}", node=node, cpu="3950m", owner_name=f"hog-{node}")


# -- D9 -----------------------------------------------------------------------------


def test_d9_five_one_moves_exactly_two_from_z1() -> None:
    """D9: counts [5,1], maxSkew 1, DoNotSchedule: two pods leave Z1 for Z2 (then 3/3)."""
    report = run(web({"a1": 3, "a2": 2, "b1": 1}))
    assert report.evicted_pods == ["default/web-0", "default/web-1"]
    assert {e.node for e in report.evictions} == {"a1"}
    assert report.skipped == ()
    after = {p.node: p.requests_after["pods"] for p in report.projections}
    assert after == {"a1": 1, "b1": 3}


def test_d9_three_two_is_balanced() -> None:
    """D9: counts [3,2] are within maxSkew 1: nothing moves and nothing is reported."""
    report = run(web({"a1": 2, "a2": 1, "b1": 2}))
    assert report.evictions == ()
    assert report.skipped == ()


def test_d9_full_destination_zone_with_node_fit_moves_nothing() -> None:
    """D9: [5,1] with Z2's only node full and nodeFit on: zero evictions, each Z1 pod no_fit."""
    report = run([*web({"a1": 3, "a2": 2, "b1": 1}), hog("b1")])
    assert report.evictions == ()
    assert skips(report) == [(f"default/web-{i}", "no_fit") for i in range(5)]
    assert "b1: insufficient cpu" in report.skipped[0].detail


# -- arguments -------------------------------------------------------------------------


SOFT = [constraint(when="ScheduleAnyway")]


@pytest.mark.parametrize(
    ("pods", "args", "evicted"),
    [
        pytest.param(web({"a1": 5, "b1": 1}, SOFT), {}, 0, id="soft-ignored-by-default"),
        pytest.param(
            web({"a1": 5, "b1": 1}, SOFT),
            {"constraints": ["ScheduleAnyway"]},
            2,
            id="soft-balanced",
        ),
        pytest.param(
            web({"a1": 5, "b1": 1}), {"constraints": ["ScheduleAnyway"]}, 0, id="hard-not-listed"
        ),
        pytest.param(
            web({"a1": 5, "b1": 1}),
            {"constraints": ["DoNotSchedule", "ScheduleAnyway"]},
            2,
            id="both-listed",
        ),
        pytest.param(
            [*web({"a1": 5, "b1": 1}), hog("b1")],
            {"topologyBalanceNodeFit": False},
            2,
            id="node-fit-off-ignores-capacity",
        ),
        pytest.param(
            web({"a1": 5, "b1": 1}), {"namespaces": {"exclude": ["default"]}}, 0, id="ns-exclude"
        ),
        pytest.param(
            web({"a1": 5, "b1": 1}), {"namespaces": {"include": ["default"]}}, 2, id="ns-include"
        ),
        pytest.param(
            web({"a1": 5, "b1": 1}),
            {"labelSelector": {"matchLabels": {"app": "db"}}},
            0,
            id="label-miss",
        ),
        pytest.param(
            web({"a1": 5, "b1": 1}), {"labelSelector": {"matchLabels": APP}}, 2, id="label-match"
        ),
        pytest.param(web({"a1": 5, "b1": 1}, [constraint(skew=2)]), {}, 1, id="max-skew-2"),
        pytest.param(web({"a1": 6}), {}, 3, id="empty-zone-counts"),
    ],
)
def test_argument_table(pods: list[objects.Pod], args: dict[str, Any], evicted: int) -> None:
    """Each argument and constraint field changes the number of evictions as documented."""
    assert len(run(pods, args=args).evictions) == evicted


def test_every_pod_counts_even_protected_ones() -> None:
    """[5,1] where three Z1 pods have local storage: the two others move (upstream sees [2,1])."""
    protected = web({"a1": 3}, prefix="keep", local_storage=True)
    report = run([*protected, *web({"a2": 2, "b1": 1})])
    assert report.evicted_pods == ["default/web-0", "default/web-1"]
    assert skips(report) == [(f"default/keep-{i}", "filtered") for i in range(3)]


def test_pinned_pods_move_last() -> None:
    """Upstream's preference: pods without a nodeSelector or node affinity move first."""
    anywhere = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE, "operator": "Exists"}]}]
            }
        }
    }
    ignore = [constraint(nodeAffinityPolicy="Ignore")]
    pinned = web({"a1": 2}, ignore, prefix="a-pinned", affinity=anywhere)
    report = run([*pinned, *web({"a1": 1}, ignore)])
    assert report.evicted_pods == ["default/web-0"]


def test_lower_priority_moves_first() -> None:
    """Among equally pinned pods, the lower priority one moves."""
    pods = [*web({"a1": 2}, prefix="high", priority=100), *web({"a2": 1}, prefix="low", priority=5)]
    report = run(pods)
    assert report.evicted_pods == ["default/low-0"]


def test_min_domains_raises_the_bar() -> None:
    """[2,1] with minDomains 3 but two zones: minimum reads 0, no zone can take a pod."""
    report = run(web({"a1": 2, "b1": 1}, [constraint(minDomains=3)]))
    assert report.evictions == ()
    assert skips(report) == [
        ("default/web-0", "no_destination"),
        ("default/web-1", "no_destination"),
    ]


def test_node_taints_policy_honor_leaves_tainted_nodes_out() -> None:
    """Z2's only node is tainted: Ignore counts Z2 (empty, no fit), Honor does not count it."""
    nodes = zone_nodes(b1={"taints": [TAINT]})
    ignore = run(web({"a1": 3}), nodes)
    honor = run(web({"a1": 3}, [constraint(nodeTaintsPolicy="Honor")]), nodes)
    assert ignore.evictions == honor.evictions == ()
    assert {code for _, code in skips(ignore)} == {"no_fit"}
    assert honor.skipped == ()


def test_node_affinity_policy_decides_which_domains_count() -> None:
    """Pods pinned to pool=a (only in Z1): Honor sees one domain, Ignore an empty Z2."""
    nodes = zone_nodes(
        a1={"labels": {ZONE: "z1", "pool": "a"}}, a2={"labels": {ZONE: "z1", "pool": "a"}}
    )
    honor = run(web({"a1": 3}, node_selector={"pool": "a"}), nodes)
    ignore = run(
        web({"a1": 3}, [constraint(nodeAffinityPolicy="Ignore")], node_selector={"pool": "a"}),
        nodes,
    )
    assert honor.evictions == ignore.evictions == ()
    assert honor.skipped == ()
    assert {code for _, code in skips(ignore)} == {"no_fit"}


def test_match_label_keys_split_revisions() -> None:
    """matchLabelKeys pod-template-hash: each revision is spread on its own."""
    keys = [constraint(matchLabelKeys=["pod-template-hash"])]
    old = web({"a1": 2, "b1": 2}, keys, prefix="old", labels={**APP, "pod-template-hash": "v1"})
    new = web({"a1": 3}, keys, prefix="new", labels={**APP, "pod-template-hash": "v2"})
    report = run([*old, *new])
    assert report.evicted_pods == ["default/new-0"]


def test_all_constraints_of_a_pod_are_judged_together() -> None:
    """#1219: hostname is skewed on b1, but moving to the empty Z1 node breaks the zone spread."""
    nodes = zone_nodes({"a1": "z1", "a2": "z1", "a3": "z1", "b1": "z2"})
    both = [constraint(), constraint(HOST)]
    report = run(web({"a1": 1, "a2": 1, "b1": 2}, both), nodes)
    assert report.evictions == ()
    assert skips(report) == [
        ("default/web-2", "no_destination"),
        ("default/web-3", "no_destination"),
    ]


def test_a_hostname_skew_moves_within_the_zone() -> None:
    """Hostname skew inside Z1 with zone and hostname constraints: the pod moves to a2."""
    both = [constraint(), constraint(HOST)]
    report = run(web({"a1": 3, "b1": 2}, both))
    assert report.evicted_pods == ["default/web-0"]
    assert {p.node: p.requests_after["pods"] for p in report.projections} == {"a1": 2, "a2": 1}


def test_a_pod_without_the_constraint_counts_but_stays() -> None:
    """Unconstrained pods matching the selector count towards Z1; only constrained ones move."""
    loose = web({"a1": 3}, [], prefix="loose")
    report = run([*loose, *web({"a2": 2, "b1": 1})])
    assert report.evicted_pods == ["default/web-0", "default/web-1"]


def test_total_limit_stops_the_plugin() -> None:
    """maxNoOfPodsToEvictTotal 1: one pod moves, the next candidate is limit_reached."""
    report = run(web({"a1": 3, "a2": 2, "b1": 1}), maxNoOfPodsToEvictTotal=1)
    assert report.evicted_pods == ["default/web-0"]
    assert skips(report) == [("default/web-1", "limit_reached")]


def test_namespaces_are_balanced_separately() -> None:
    """The same labels in two namespaces are two spreads: each is judged on its own pods."""
    here = web({"a1": 3}, prefix="here")
    there = web({"b1": 3}, prefix="there", namespace="other")
    report = run([*here, *there])
    assert sorted(report.evicted_pods) == ["default/here-0", "other/there-0"]


# -- pure helpers --------------------------------------------------------------------


def test_domains_count_and_minimum() -> None:
    """Eligible nodes' domains, empty ones included; minDomains lowers the minimum to 0."""
    nodes = zone_nodes({"a1": "z1", "b1": "z2", "c1": "z3"})
    [pod, *others] = web({"a1": 2, "b1": 1}, [constraint(minDomains=4)])
    domains = spread.Domains.count(
        spread.spreads_of(pod)[0], nodes, {"a1": [pod, others[0]], "b1": [others[1]]}
    )
    assert domains.counts == {"z1": 2, "z2": 1, "z3": 0}
    assert domains.minimum() == 0
    assert domains.violations() == ["z1"]
    assert spread.admits(domains, pod, "a1", nodes[2])
    assert not spread.admits(domains, pod, "a1", nodes[1])
