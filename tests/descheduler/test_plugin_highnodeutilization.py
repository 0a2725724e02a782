"""HighNodeUtilization: underutilized nodes are emptied onto the fullest nodes that take their pods."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from descheduler.framework import CycleReport
from descheduler.plugins.highnodeutilization import plugin as hnu
from kube import objects
from kube.classify import KubeQOS
from tests import builders
from tests.descheduler import fakes

NAME = "HighNodeUtilization"
ARGS = {"thresholds": {"cpu": 40}}


def pods_on(
    node: str, *cpus: str, prefix: str | None = None, **overrides: Any
) -> list[objects.Pod]:
    """One pod per CPU request on `node`, named <prefix>-<i> (prefix defaults to the node)."""
    prefix = prefix or node
    return [
        builders.make_pod(f"{prefix}-{i}", node=node, cpu=cpu, owner_name=prefix, **overrides)
        for i, cpu in enumerate(cpus)
    ]


def packing_pods() -> list[objects.Pod]:
    """a 2400m (60%), b 400m (10%), c 1200m (30%): b and c are below 40%."""
    return [*pods_on("a", *["600m"] * 4), *pods_on("b", "400m"), *pods_on("c", *["400m"] * 3)]


def run(
    pods: Sequence[objects.Pod],
    args: dict[str, Any] | None = None,
    *,
    nodes: Sequence[objects.Node] | None = None,
    **top: Any,
) -> CycleReport:
    """One cycle with HighNodeUtilization as the only balance plugin."""
    return fakes.run_plugin(
        NAME,
        ARGS if args is None else args,
        pods,
        point="balance",
        nodes=fakes.nodes("a", "b", "c") if nodes is None else nodes,
        **top,
    )


def skips(report: CycleReport) -> list[tuple[str, str]]:
    return [(s.pod, s.reason_code.value) for s in report.skipped]


def notes(report: CycleReport) -> list[tuple[str, str]]:
    return [(n.reason.value, n.detail) for n in report.notes]


def cpu_after(report: CycleReport) -> dict[str, int]:
    return {p.node: p.requests_after["cpu"] for p in report.projections}


# -- packing -------------------------------------------------------------------------


def test_underutilized_nodes_are_emptied_least_utilized_first() -> None:
    """b (10%) then c (30%) are drained onto a, the only node above 40%."""
    report = run(packing_pods())
    assert report.evicted_pods == ["default/b-0", "default/c-0", "default/c-1", "default/c-2"]
    assert cpu_after(report) == {"a": 4000, "b": 0, "c": 0}
    assert "cpu 10.00% (mark 40.00%)" in report.evictions[0].reason


def test_pods_that_fit_nowhere_stay() -> None:
    """a can take 1600m: b's pod and two of c's fit, the last of c's is no_fit."""
    pods = [
        *pods_on("a", *["600m"] * 4),
        *pods_on("b", "400m"),
        *pods_on("c", "400m", "400m", "800m"),
    ]
    report = run(pods)
    assert report.evicted_pods == ["default/b-0", "default/c-0", "default/c-1"]
    assert skips(report) == [("default/c-2", "no_fit")]
    assert "a: insufficient cpu" in report.skipped[0].detail


def test_the_fullest_destination_is_chosen() -> None:
    """Two destinations above 40%: the pod is projected onto the fuller one."""
    pods = [*pods_on("a", "2000m"), *pods_on("d", "3000m"), *pods_on("b", "400m")]
    report = run(pods, nodes=fakes.nodes("a", "b", "d"))
    assert report.evicted_pods == ["default/b-0"]
    assert cpu_after(report) == {"b": 0, "d": 3400}


@pytest.mark.parametrize(
    ("args", "evicted", "note"),
    [
        pytest.param(ARGS, 4, None, id="packing"),
        pytest.param(
            {"thresholds": {"cpu": 5}},
            0,
            "no node is underutilized (at or below thresholds)",
            id="none-under",
        ),
        pytest.param(
            {**ARGS, "numberOfNodes": 2},
            0,
            "2 underutilized nodes, numberOfNodes is 2",
            id="number-of-nodes",
        ),
        pytest.param({**ARGS, "numberOfNodes": 1}, 4, None, id="number-of-nodes-below"),
        pytest.param(
            {**ARGS, "evictableNamespaces": {"exclude": ["default"]}}, 0, None, id="ns-excluded"
        ),
        pytest.param(
            {**ARGS, "evictionModes": ["OnlyThresholdingResources"]},
            4,
            None,
            id="mode-all-request-cpu",
        ),
        pytest.param({"thresholds": {"cpu": 40, "memory": 40}}, 4, None, id="two-resources"),
    ],
)
def test_argument_table(args: dict[str, Any], evicted: int, note: str | None) -> None:
    """The packing cluster under each argument: how many pods move, and the note when none can."""
    report = run(packing_pods(), args)
    assert len(report.evictions) == evicted
    assert [detail for _, detail in notes(report)] == ([note] if note else [])


def test_only_thresholding_resources_skips_pods_without_such_requests() -> None:
    """evictionModes OnlyThresholdingResources: b's BestEffort pod is filtered, its other pod moves."""
    idle = builders.make_pod("b-idle", node="b", qos=KubeQOS.BEST_EFFORT, owner_name="idle")
    pods = [*pods_on("a", *["600m"] * 4), idle, *pods_on("b", "400m")]
    report = run(pods, {**ARGS, "evictionModes": ["OnlyThresholdingResources"]})
    assert report.evicted_pods == ["default/b-0"]
    assert skips(report) == [("default/b-idle", "filtered")]
    assert "OnlyThresholdingResources" in report.skipped[0].detail
    assert run(pods).evicted_pods == ["default/b-idle", "default/b-0"]


def test_excluded_namespaces_are_reported_filtered() -> None:
    """evictableNamespaces.exclude: b's pod in kube-system is filtered, c's pods move."""
    pods = [
        *pods_on("a", *["600m"] * 4),
        *pods_on("b", "400m", namespace="kube-system"),
        *pods_on("c", "400m"),
    ]
    report = run(pods, {**ARGS, "evictableNamespaces": {"exclude": ["kube-system"]}})
    assert report.evicted_pods == ["default/c-0"]
    assert skips(report) == [("kube-system/b-0", "filtered")]


def test_a_cordoned_node_is_no_destination() -> None:
    """The only node above thresholds is cordoned: nothing can be packed."""
    nodes = [
        builders.make_node("a", unschedulable=True),
        builders.make_node("b"),
        builders.make_node("c"),
    ]
    report = run(packing_pods(), nodes=nodes)
    assert report.evictions == ()
    assert notes(report) == [("no_destination", "no schedulable node above thresholds")]


def test_destinations_without_room_stop_the_drain() -> None:
    """a is full on pods (3 of 3): the headroom check stops before any eviction."""
    nodes = [builders.make_node("a", pods="3"), builders.make_node("b"), builders.make_node("c")]
    pods = [*pods_on("a", "1000m", "1000m", "1000m"), *pods_on("b", "400m"), *pods_on("c", "400m")]
    report = run(pods, nodes=nodes)
    assert report.evictions == ()
    assert notes(report)[0] == (
        "no_destination",
        "destinations have no room left on pods; node b is not emptied",
    )


def test_total_limit_stops_the_plugin() -> None:
    """maxNoOfPodsToEvictTotal 2: the two first pods move, the third is limit_reached."""
    report = run(packing_pods(), maxNoOfPodsToEvictTotal=2)
    assert report.evicted_pods == ["default/b-0", "default/c-0"]
    assert skips(report) == [("default/c-1", "limit_reached")]


# -- every node underutilized (upstream does nothing, #725) ---------------------------------


def test_all_underutilized_pack_onto_the_most_utilized() -> None:
    """a 40%, c 30%, b 10%, all below 50%: b's and then c's pods are packed onto a."""
    pods = [*pods_on("a", *["400m"] * 4), *pods_on("b", "400m"), *pods_on("c", *["400m"] * 3)]
    report = run(pods, {"thresholds": {"cpu": 50}})
    assert report.evicted_pods == ["default/b-0", "default/c-0", "default/c-1", "default/c-2"]
    assert cpu_after(report) == {"a": 3200, "b": 0, "c": 0}
    assert notes(report) == []


def test_all_underutilized_pods_only_move_up_and_receivers_are_kept() -> None:
    """b's pod does not fit the fullest node a, so it goes to c; c then is not drained."""
    pods = [*pods_on("a", "3700m"), *pods_on("b", "1000m"), *pods_on("c", *["400m"] * 3)]
    report = run(pods, {"thresholds": {"cpu": 95}})
    assert report.evicted_pods == ["default/b-0"]
    assert cpu_after(report) == {"b": 0, "c": 2200}
    assert report.skipped == ()


def test_all_underutilized_the_top_node_is_never_drained() -> None:
    """Two nodes, both below thresholds: the less utilized one is packed onto the other."""
    pods = [*pods_on("a", "400m"), *pods_on("b", "800m")]
    report = run(pods, {"thresholds": {"cpu": 50}}, nodes=fakes.nodes("a", "b"))
    assert report.evicted_pods == ["default/a-0"]
    assert cpu_after(report) == {"a": 0, "b": 1200}


def test_requests_any_counts_present_requests_even_zero() -> None:
    """Upstream's withResourceRequestForAny: a request that is set counts, even "0"."""
    zero = builders.make_pod(
        "z", containers=[{"name": "c", "image": "i", "resources": {"requests": {"cpu": "0"}}}]
    )
    assert hnu.requests_any(zero, ["cpu"])
    assert not hnu.requests_any(builders.make_pod("be", qos=KubeQOS.BEST_EFFORT), ["cpu"])
    assert hnu.requests_any(builders.make_pod("m", cpu=None), ["memory"])
