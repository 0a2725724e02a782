"""RemoveDuplicates: ceil(replicas / feasible nodes) per node, a destination for every move."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from descheduler.framework import CycleReport
from descheduler.plugins.removeduplicates import groups
from kube import eviction, objects
from tests import builders
from tests.descheduler import fakes

NAME = "RemoveDuplicates"
NODES = ("n1", "n2", "n3")
TAINT = "dedicated=db:NoSchedule"


def replicas(
    spread: Sequence[int],
    *,
    owner: str = "web",
    kind: str | None = "ReplicaSet",
    prefix: str = "web",
    **overrides: Any,
) -> list[objects.Pod]:
    """One owner's pods, `spread[i]` of them on node n<i+1>, named prefix-0, prefix-1, ...

    `kind` None makes bare pods (no owner reference).
    """
    pods: list[objects.Pod] = []
    for node, count in zip(NODES, spread, strict=False):
        for _ in range(count):
            pods.append(
                builders.make_pod(
                    f"{prefix}-{len(pods)}", node=node, owner=kind, owner_name=owner, **overrides
                )
            )
    return pods


def run(
    pods: Sequence[objects.Pod],
    *,
    args: dict[str, Any] | None = None,
    nodes: Sequence[objects.Node] | None = None,
    backend: fakes.FakeBackend | None = None,
    **top: Any,
) -> CycleReport:
    """One cycle with RemoveDuplicates as the only balance plugin."""
    return fakes.run_plugin(
        NAME,
        args,
        pods,
        point="balance",
        nodes=fakes.nodes(*NODES) if nodes is None else nodes,
        backend=backend,
        **top,
    )


def skips(report: CycleReport) -> list[tuple[str, str]]:
    return [(s.pod, s.reason_code.value) for s in report.skipped]


# -- D8 -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spread", "tainted", "evicted"),
    [
        pytest.param((2, 2, 2), False, [], id="2-2-2-balanced"),
        pytest.param((4, 1, 1), False, ["default/web-0", "default/web-1"], id="4-1-1-two-go"),
        pytest.param((3, 0, 0), True, [], id="one-schedulable-node"),
    ],
)
def test_d8_ceil_of_replicas_over_feasible_nodes(
    spread: tuple[int, int, int], tainted: bool, evicted: list[str]
) -> None:
    """D8: 2/2/2 stays, 4/1/1 loses exactly two from n1, 3 on the only untainted node stay."""
    nodes = [builders.make_node(n, taints=[TAINT] if tainted and n != "n1" else []) for n in NODES]
    report = run(replicas(spread), nodes=nodes)
    assert report.evicted_pods == evicted
    assert {e.node for e in report.evictions} <= {"n1"}
    assert report.skipped == ()


def test_d8_moves_are_projected_onto_the_emptiest_nodes() -> None:
    """4/1/1: one pod is projected onto n2 and one onto n3, so both end at 2."""
    report = run(replicas((4, 1, 1)))
    after = {p.node: p.requests_after["pods"] for p in report.projections}
    assert after == {"n1": 2, "n2": 2, "n3": 2}


# -- arguments and rules ----------------------------------------------------------


@pytest.mark.parametrize(
    ("pods", "args", "evicted"),
    [
        pytest.param(
            replicas((4, 1, 1)), {"excludeOwnerKinds": ["ReplicaSet"]}, 0, id="excluded-kind"
        ),
        pytest.param(
            replicas((4, 1, 1)), {"excludeOwnerKinds": ["StatefulSet"]}, 2, id="other-kind-excluded"
        ),
        pytest.param(
            replicas((4, 1, 1)), {"namespaces": {"include": ["other"]}}, 0, id="ns-include"
        ),
        pytest.param(
            replicas((4, 1, 1)), {"namespaces": {"exclude": ["default"]}}, 0, id="ns-exclude"
        ),
        pytest.param(
            replicas((4, 1, 1)), {"namespaces": {"include": ["default"]}}, 2, id="ns-included"
        ),
        pytest.param(replicas((3, 2, 2)), {}, 0, id="7-on-3-nodes-as-even-as-possible"),
        pytest.param(replicas((5, 0, 0)), {}, 3, id="5-on-one-node"),
        pytest.param(
            replicas((1, 0, 0), image="app:1") + replicas((1, 0, 0), prefix="v2", image="app:2"),
            {},
            0,
            id="different-images-are-not-duplicates",
        ),
        pytest.param(
            replicas((4, 1, 1), kind=None),
            {},
            0,
            id="bare-pods-are-no-group",
        ),
        pytest.param(replicas((4, 1, 1), kind="StatefulSet"), {}, 2, id="any-owner-kind-counts"),
        pytest.param(
            replicas((1, 0, 0)) + replicas((1, 0, 0), owner="api", prefix="api"),
            {},
            0,
            id="two-owners-one-pod-each",
        ),
    ],
)
def test_argument_table(pods: list[objects.Pod], args: dict[str, Any], evicted: int) -> None:
    """Each argument and grouping rule changes the number of evictions as documented."""
    assert len(run(pods, args=args).evictions) == evicted


def test_a_protected_replica_still_counts() -> None:
    """4/1/1 with a local-storage replica on n1: it stays, two others go (upstream sees 3/1/1)."""
    pods = replicas((4, 1, 1))
    pods[0] = builders.make_pod("web-0", node="n1", owner_name="web", local_storage=True)
    report = run(pods)
    assert report.evicted_pods == ["default/web-1", "default/web-2"]
    assert skips(report) == [("default/web-0", "filtered")]


def test_a_cordoned_node_is_not_feasible() -> None:
    """4/2 on n1/n2 with n3 cordoned: two feasible nodes, target 3, one pod goes to n2."""
    nodes = [
        builders.make_node("n1"),
        builders.make_node("n2"),
        builders.make_node("n3", unschedulable=True),
    ]
    report = run(replicas((4, 2, 0)), nodes=nodes)
    assert report.evicted_pods == ["default/web-0"]
    assert {p.node: p.requests_after["pods"] for p in report.projections} == {"n1": 3, "n2": 3}


def test_node_affinity_limits_the_feasible_nodes() -> None:
    """Pods selecting pool=a, found on n1 and n2 only: 4 on n1 means target 2 and two go to n2."""
    nodes = [
        builders.make_node("n1", labels={"pool": "a"}),
        builders.make_node("n2", labels={"pool": "a"}),
        builders.make_node("n3"),
    ]
    report = run(replicas((4, 0, 0), node_selector={"pool": "a"}), nodes=nodes)
    assert report.evicted_pods == ["default/web-0", "default/web-1"]
    assert {p.node for p in report.projections} == {"n1", "n2"}


def test_no_room_below_the_target_means_no_eviction() -> None:
    """4/1/1 with n2 and n3 full: each excess replica ends with no_fit instead of leaving."""
    hogs = [
        builders.make_pod(f"hog-{n}", node=n, cpu="3950m", owner_name=f"hog-{n}")
        for n in ("n2", "n3")
    ]
    report = run(replicas((4, 1, 1)) + hogs)
    assert report.evictions == ()
    assert skips(report) == [(f"default/web-{i}", "no_fit") for i in range(4)]
    assert (
        "fits no feasible node below 2 replicas (n2: insufficient cpu" in report.skipped[0].detail
    )


def test_a_refused_eviction_is_replaced_by_the_next_duplicate() -> None:
    """The API refuses web-0 (PDB): web-1 and web-2 go instead, web-0 is pdb_blocked."""
    backend = fakes.FakeBackend(outcomes={"web-0": eviction.Outcome.PDB_BLOCKED})
    report = run(replicas((4, 1, 1)), backend=backend)
    assert report.evicted_pods == ["default/web-1", "default/web-2"]
    assert skips(report) == [("default/web-0", "pdb_blocked")]


def test_node_limit_stops_the_node() -> None:
    """maxNoOfPodsToEvictPerNode 1: one eviction from n1, the next candidate is limit_reached."""
    report = run(replicas((4, 1, 1)), maxNoOfPodsToEvictPerNode=1)
    assert report.evicted_pods == ["default/web-0"]
    assert skips(report) == [("default/web-1", "limit_reached")]


def test_total_limit_stops_every_group() -> None:
    """maxNoOfPodsToEvictTotal 1 with two crowded groups: one eviction in all."""
    pods = replicas((4, 1, 1)) + replicas((4, 1, 1), owner="api", prefix="api")
    report = run(pods, maxNoOfPodsToEvictTotal=1)
    assert report.evicted_pods == ["default/api-0"]
    assert skips(report) == [("default/api-1", "limit_reached")]


def test_the_youngest_duplicate_goes_first() -> None:
    """Among duplicates, the newest pod (then lower priority) is evicted first."""
    pods = replicas((2, 0, 0))
    young = builders.make_pod(
        "web-old-name", node="n1", owner_name="web", created=builders.T0.replace(hour=13)
    )
    report = run([*pods, young, *replicas((0, 1, 1), prefix="x", owner="web")])
    assert report.evicted_pods[0] == "default/web-old-name"


# -- pure helpers -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("replica_count", "feasible", "target"),
    [
        pytest.param(6, 3, 2, id="even"),
        pytest.param(7, 3, 3, id="rounded-up"),
        pytest.param(3, 1, 3, id="one-node-keeps-all"),
        pytest.param(3, 0, 3, id="no-feasible-node-keeps-all"),
        pytest.param(2, 5, 1, id="more-nodes-than-replicas"),
    ],
)
def test_target_per_node(replica_count: int, feasible: int, target: int) -> None:
    """ceil(replicas / feasible nodes), every replica when no node is feasible."""
    assert groups.target_per_node(replica_count, feasible) == target


def test_group_key_reads_owners_and_sorted_images() -> None:
    """Namespace, every owner (kind, name, uid) and the sorted images make the key."""
    containers = [{"name": "b", "image": "z:1"}, {"name": "a", "image": "a:1"}]
    pod = builders.make_pod("p", owner_name="web", containers=containers)
    key = groups.group_key(pod)
    assert key is not None
    assert key.images == ("a:1", "z:1")
    assert [(kind, name) for kind, name, _ in key.owners] == [("ReplicaSet", "web")]
    assert str(key) == "default/ReplicaSet/web"
    assert groups.group_key(pod, ["ReplicaSet"]) is None
    assert groups.group_key(builders.make_pod("bare", owner=None)) is None


@pytest.mark.parametrize(
    ("node", "pod_overrides", "feasible"),
    [
        pytest.param(builders.make_node("n"), {}, True, id="plain"),
        pytest.param(builders.make_node("n", taints=[TAINT]), {}, False, id="tainted"),
        pytest.param(
            builders.make_node("n", taints=[TAINT]),
            {"tolerations": [{"key": "dedicated", "operator": "Exists"}]},
            True,
            id="tolerated",
        ),
        pytest.param(builders.make_node("n", unschedulable=True), {}, False, id="cordoned"),
        pytest.param(builders.make_node("n", ready=False), {}, False, id="not-ready"),
        pytest.param(
            builders.make_node("n"), {"node_selector": {"pool": "a"}}, False, id="selector"
        ),
        pytest.param(builders.make_node("n"), {"cpu": "64"}, True, id="capacity-is-not-judged"),
    ],
)
def test_could_schedule(node: objects.Node, pod_overrides: dict[str, Any], feasible: bool) -> None:
    """Ready, schedulable, taints tolerated, selector matched; capacity is left out."""
    assert groups.could_schedule(builders.make_pod("p", **pod_overrides), node) is feasible
