"""Destinations of LowNodeUtilization: the Pool answers exactly as `find` over the same nodes."""

from __future__ import annotations

from datetime import datetime

import pytest

from descheduler.framework import Reason, Refusal, Snapshot
from descheduler.framework.snapshot import ClusterState
from descheduler.plugins.lownodeutilization import classify, destinations
from descheduler.plugins.lownodeutilization.meter import Requests
from kube import objects
from tests import builders

HIGH = classify.static_marks({"cpu": 20}, {"cpu": 70}).high
RESOURCES = sorted(set(classify.BASIC_RESOURCES) | set(HIGH))
ZONE = "topology.kubernetes.io/zone"


def destination_nodes() -> list[objects.Node]:
    """Ten 10-CPU destinations: two no pod of the test can use, one in zone b, seven in zone a."""
    return [
        builders.make_node("d0-tainted", cpu="10", taints=["dedicated=db:NoSchedule"]),
        builders.make_node("d1-cordoned", cpu="10", unschedulable=True),
        builders.make_node("d2-zone-b", cpu="10", labels={ZONE: "b"}),
        *(builders.make_node(f"d{i}", cpu="10", labels={ZONE: "a"}) for i in range(3, 10)),
    ]


def snapshot_with_load() -> tuple[Snapshot, list[objects.Node]]:
    """d2..d9 request 4.0, 4.5, ... 7.5 CPUs (d9 is past the 70% mark already)."""
    nodes = destination_nodes()
    pods = [
        builders.make_pod(f"{node.name}-load", node=node.name, cpu=f"{3500 + 500 * i}m")
        for i, node in enumerate(nodes[2:], start=1)
    ]
    state = ClusterState(nodes=(builders.make_node("source", cpu="10"), *nodes), pods=tuple(pods))
    return Snapshot(state, taken_at=datetime(2024, 5, 1, 12, 0)), nodes


def build_pool(snapshot: Snapshot, nodes: list[objects.Node]) -> destinations.Pool:
    meter = Requests(snapshot)

    def heat(node: objects.Node) -> float:
        return classify.heat(meter.used(node.name), meter.capacity(node), HIGH)

    return destinations.Pool(snapshot, meter, nodes, HIGH, RESOURCES, heat)


def found_by_find(
    snapshot: Snapshot, pool: destinations.Pool, pod: objects.Pod
) -> objects.Node | Refusal:
    meter = Requests(snapshot)
    cooler = pool.coolest_first(excluding="source")
    return destinations.find(
        snapshot, meter, pod, meter.of_pod(pod), cooler, HIGH, plugin="LowNodeUtilization"
    )


POD_CASES = [
    pytest.param({"cpu": "500m"}, id="small-lands-on-the-coolest-usable"),
    pytest.param({"cpu": "2800m"}, id="large-passes-over-full-nodes"),
    pytest.param({"cpu": "4"}, id="too-large-for-every-node"),
    pytest.param({"cpu": "9"}, id="larger-than-any-room"),
    pytest.param(
        {"cpu": "500m", "tolerations": [{"key": "dedicated", "operator": "Exists"}]},
        id="tolerates-the-taint",
    ),
    pytest.param({"cpu": "500m", "node_selector": {ZONE: "b"}}, id="selects-zone-b"),
    pytest.param({"cpu": "3", "node_selector": {ZONE: "b"}}, id="selects-zone-b-too-large"),
    pytest.param({"cpu": "500m", "node_selector": {ZONE: "c"}}, id="selects-nothing"),
]


@pytest.mark.parametrize("overrides", POD_CASES)
def test_place_answers_as_find(overrides: dict[str, object]) -> None:
    """The node `place` picks, or its refusal's reason and wording, are `find`'s."""
    snapshot, nodes = snapshot_with_load()
    pool = build_pool(snapshot, nodes)
    pod = builders.make_pod("mover", node="source", **overrides)
    expected = found_by_find(snapshot, pool, pod)
    meter = Requests(snapshot)
    found = pool.place(pod, meter.of_pod(pod), excluding="source", plugin="LowNodeUtilization")
    assert found == expected


def test_place_follows_the_projection() -> None:
    """After pods land, `place` still answers as a fresh `find` (the pool's rooms stay current)."""
    snapshot, nodes = snapshot_with_load()
    pool = build_pool(snapshot, nodes)
    meter = Requests(snapshot)
    for i in range(12):
        pod = builders.make_pod(f"mover-{i}", node="source", cpu="1500m")
        expected = found_by_find(snapshot, pool, pod)
        found = pool.place(pod, meter.of_pod(pod), excluding="source", plugin="LowNodeUtilization")
        assert found == expected
        if isinstance(found, objects.Node):
            snapshot.record_eviction(pod, found.name)
            pool.landed(found.name)
    assert isinstance(found, Refusal)  # five 1500m pods fill the room


def test_a_refusal_names_the_closest_candidates_first() -> None:
    """Overloaded candidates are shown before unusable ones, three in all, then how many more."""
    snapshot, nodes = snapshot_with_load()
    pool = build_pool(snapshot, nodes)
    pod = builders.make_pod("mover", node="source", cpu="4")
    found = pool.place(pod, Requests(snapshot).of_pod(pod), excluding="source", plugin="LNU")
    assert isinstance(found, Refusal)
    assert found.reason is Reason.WOULD_OVERLOAD_DESTINATION
    assert found.detail == (
        "d2-zone-b: would exceed its mark on cpu; d3: would exceed its mark on cpu;"
        " d4: would exceed its mark on cpu; and 7 more"
    )
