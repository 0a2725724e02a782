"""LowNodeLoad destinations: predicates, the high-mark check, the ledger, the stop condition."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from descheduler.plugins import lownodeload
from descheduler.plugins.lownodeload import classify, fit, usage
from descheduler.plugins.lownodeload.classify import Marks, Track
from kube import objects
from kube.classify import KoordQOS
from tests.builders import T0, make_node, make_nodemetric, make_pod

WEIGHTS = {"cpu": 1, "memory": 1}
STATIC = {"lowThresholds": {"cpu": 30}, "highThresholds": {"cpu": 70}}


@dataclass
class World:
    loads: dict[objects.NodeName, usage.NodeLoad]
    pods: dict[objects.NodeName, list[objects.Pod]]
    marks: dict[objects.NodeName, Marks]
    ledger: fit.Ledger

    def pod(self, name: str) -> objects.Pod:
        return next(p for pods in self.pods.values() for p in pods if p.name == name)

    def dests(self, *names: str) -> list[usage.NodeLoad]:
        return [self.loads[objects.NodeName(n)] for n in names]

    def find(
        self, pod: str, *, source: str = "A", dests: Sequence[str] = ("B",), **kw: Any
    ) -> fit.Fit:
        kw.setdefault("node_fit", True)
        kw.setdefault("track", Track.NODE)
        return fit.find_destination(
            self.pod(pod),
            self.loads[objects.NodeName(source)],
            self.dests(*dests),
            self.ledger,
            self.marks,
            WEIGHTS,
            **kw,
        )


def _world(
    spec: Mapping[str, Mapping[str, int]],
    *,
    node_kw: Mapping[str, Mapping[str, Any]] | None = None,
    pod_kw: Mapping[str, Mapping[str, Any]] | None = None,
    unreported: Sequence[str] = (),
    thresholds: Mapping[str, Any] = STATIC,
) -> World:
    """Nodes named in `spec`, each with pods using the given CPU millicores."""
    loads, pods = {}, {}
    for node_name, pod_cpu in spec.items():
        node = make_node(node_name, **(node_kw or {}).get(node_name, {}))
        objs = [make_pod(p, node=node_name, **(pod_kw or {}).get(p, {})) for p in pod_cpu]
        reported = {p: cpu for p, cpu in pod_cpu.items() if p not in unreported}
        load = usage.node_load(
            node,
            make_nodemetric(node_name, pods=reported),
            objs,
            now=T0,
            expiration=timedelta(minutes=3),
        )
        assert isinstance(load, usage.NodeLoad)
        loads[node.name], pods[node.name] = load, objs
    (pool,) = lownodeload.Args.from_mapping(dict(thresholds)).pools
    marks = classify.pool_marks(pool, list(loads.values()))
    return World(loads, pods, marks, fit.Ledger(loads, pods))


def test_fits_when_predicates_pass_and_high_mark_holds() -> None:
    """D1: the 1000m pod fits B (400m + 1000m ≤ 2800m)."""
    world = _world({"A": {"a1000": 1000, "a2700": 2700}, "B": {"b400": 400}})
    assert world.find("a1000") == fit.Fit(objects.NodeName("B"))


def test_checking_reserves_nothing() -> None:
    """Asking twice gives the same answer; only commit changes projected usage."""
    world = _world({"A": {"a1000": 1000, "a2700": 2700}, "B": {"b400": 400}})
    world.find("a1000")
    world.find("a1000")
    assert world.ledger.usage(objects.NodeName("B")).cpu == 400


def test_commit_moves_usage_and_requests() -> None:
    """commit lowers the source and raises the destination, usage and requests alike."""
    world = _world({"A": {"a1000": 1000, "a2700": 2700}, "B": {"b400": 400}})
    a, b = objects.NodeName("A"), objects.NodeName("B")
    before_a, before_b = world.ledger.requested(a), world.ledger.requested(b)
    world.ledger.commit(world.pod("a1000"), a, b)
    assert (world.ledger.usage(a).cpu, world.ledger.usage(b).cpu) == (2700, 1400)
    assert (world.ledger.usage(a)["pods"], world.ledger.usage(b)["pods"]) == (1, 2)
    assert world.ledger.requested(a) == {**before_a, "cpu": 100, "memory": 128 * 2**20, "pods": 1}
    assert world.ledger.requested(b)["pods"] == before_b["pods"] + 1
    assert world.ledger.moves == {world.pod("a1000").uid: (a, b)}
    with pytest.raises(ValueError, match="already moved"):
        world.ledger.commit(world.pod("a1000"), a, b)


def test_prod_usage_follows_moves_made_before_it_was_asked() -> None:
    """Prod usage is worked out on first use; moves committed earlier are in it, in either order."""
    spec = {"A": {"a1000": 1000, "a700": 700, "batch": 2000}, "B": {"b400": 400}}
    pod_kw = {"batch": {"qos": KoordQOS.BE}}
    a, b = objects.NodeName("A"), objects.NodeName("B")
    early = _world(spec, pod_kw=pod_kw)
    assert (early.ledger.prod_usage(a).cpu, early.ledger.prod_usage(b).cpu) == (1700, 400)
    late = _world(spec, pod_kw=pod_kw)
    for world in (early, late):
        world.ledger.commit(world.pod("a1000"), a, b)
        world.ledger.commit(world.pod("batch"), a, b)  # not prod: prod usage stays
        world.ledger.commit(world.pod("a700"), a, None)
    for world in (early, late):
        assert world.ledger.prod_usage(a) == {"cpu": 0, "memory": 0, "pods": 0}
        assert world.ledger.prod_usage(b) == {"cpu": 1400, "memory": 0, "pods": 2}
        assert world.ledger.amounts(b, Track.PROD) == {"cpu": 1400, "memory": 0, "pods": 2}
        assert world.ledger.usage(a).cpu == 0 and world.ledger.usage(b).cpu == 3400


def test_would_overload_destination() -> None:
    """A destination that passes the predicates but would go above its high mark is refused."""
    world = _world({"A": {"a1700": 1700, "a2000": 2000}, "B": {"b1200": 1200}})
    found = world.find("a1700")
    assert (found.reason, found.destination) == (fit.WOULD_OVERLOAD, None)
    assert found.detail == "B: would exceed its high mark on cpu"


def test_exactly_at_the_high_mark_fits() -> None:
    """Reaching the high mark exactly is allowed (only above it overloads)."""
    world = _world({"A": {"a1600": 1600, "a2000": 2000}, "B": {"b1200": 1200}})
    assert world.find("a1600")


def test_no_fit_when_every_destination_fails_predicates() -> None:
    """A NoSchedule taint the pod does not tolerate: no_fit with the predicate's words."""
    world = _world(
        {"A": {"a1000": 1000, "a2700": 2700}, "B": {"b400": 400}},
        node_kw={"B": {"taints": ["dedicated=db:NoSchedule"]}},
    )
    found = world.find("a1000")
    assert found.reason == fit.NO_FIT
    assert found.detail == "B: untolerated taint dedicated=db:NoSchedule"


def test_overload_wins_over_no_fit_in_the_reason() -> None:
    """One destination tainted, the other too full: would_overload_destination."""
    world = _world(
        {"A": {"a1700": 1700, "a2000": 2000}, "B": {"b1200": 1200}, "C": {"c100": 100}},
        node_kw={"C": {"taints": ["dedicated=db:NoSchedule"]}},
    )
    found = world.find("a1700", dests=("B", "C"))
    assert found.reason == fit.WOULD_OVERLOAD
    assert "C: untolerated taint" in found.detail


def test_least_loaded_destination_is_chosen() -> None:
    """Among fitting destinations the coolest (weighted) wins, then the first by name."""
    world = _world(
        {
            "A": {"a1000": 1000, "a2700": 2700},
            "B": {"b800": 800},
            "C": {"c400": 400},
            "D": {"d400": 400},
        }
    )
    assert world.find("a1000", dests=("B", "D", "C")).destination == "C"


def test_requests_are_projected() -> None:
    """Requests committed earlier count against allocatable for the next pod."""
    big = {"cpu": "2", "memory": "128Mi"}
    world = _world(
        {"A": {"a1": 1000, "a2": 1000, "a3": 1700}, "B": {"b400": 400}},
        pod_kw={"a1": big, "a2": big, "b400": {"cpu": "100m"}},
    )
    a, b = objects.NodeName("A"), objects.NodeName("B")
    world.ledger.commit(world.pod("a1"), a, b)
    found = world.find("a2")
    assert found.reason == fit.NO_FIT
    assert found.detail == "B: insufficient cpu"


def test_unreported_pod_does_not_fit_with_node_fit() -> None:
    """Without a podsMetric entry the usage check cannot be made: no_fit."""
    world = _world({"A": {"a1000": 1000, "a2700": 2700}, "B": {"b400": 400}}, unreported=["a1000"])
    assert world.find("a1000").reason == fit.NO_FIT


def test_node_fit_off_checks_nothing() -> None:
    """nodeFit false: the least loaded destination, whatever its taints and marks."""
    world = _world(
        {"A": {"a1700": 1700, "a2000": 2000}, "B": {"b1200": 1200}},
        node_kw={"B": {"taints": ["dedicated=db:NoSchedule"]}},
    )
    assert world.find("a1700", node_fit=False) == fit.Fit(objects.NodeName("B"))


def test_no_destinations() -> None:
    """With no destination at all the reason is no_destination."""
    world = _world({"A": {"a1000": 1000, "a2700": 2700}})
    assert world.find("a1000", dests=()).reason == fit.NO_DESTINATION


def test_prod_track_checks_prod_and_node_marks() -> None:
    """For a prod source the destination must stay under its prod high mark too."""
    thresholds = {
        "lowThresholds": {"cpu": 30},
        "highThresholds": {"cpu": 90},
        "prodLowThresholds": {"cpu": 20},
        "prodHighThresholds": {"cpu": 40},
    }
    world = _world({"A": {"a1000": 1000, "a2000": 2000}, "B": {"b800": 800}}, thresholds=thresholds)
    found = world.find("a1000", track=Track.PROD)
    assert found.reason == fit.WOULD_OVERLOAD  # 800 + 1000 > 1600 prod high
    assert found.detail == "B: would exceed its high mark on prod cpu"
    assert world.find("a1000", track=Track.NODE)  # 1800 ≤ 3600 node high


def test_stop_reason() -> None:
    """Stop once the source is under its high marks, or the destinations are full."""
    world = _world({"A": {"a1000": 1000, "a2700": 2700}, "B": {"b2700": 2700}})
    a, b = objects.NodeName("A"), objects.NodeName("B")
    dests = world.dests("B")
    assert fit.headroom(dests, world.ledger, world.marks, Track.NODE, ["cpu"]) == {"cpu": 100}
    assert fit.stop_reason(world.loads[a], dests, world.ledger, world.marks, Track.NODE) is None
    world.ledger.commit(world.pod("a1000"), a, b)
    assert fit.stop_reason(world.loads[a], dests, world.ledger, world.marks, Track.NODE) == (
        fit.STOP_RELIEVED
    )


def test_stop_when_no_headroom() -> None:
    """A destination at its high mark leaves no headroom: stop."""
    world = _world({"A": {"a1000": 1000, "a2700": 2700}, "B": {"b2800": 2800}})
    a = objects.NodeName("A")
    assert fit.stop_reason(
        world.loads[a], world.dests("B"), world.ledger, world.marks, Track.NODE
    ) == (fit.STOP_NO_HEADROOM)
