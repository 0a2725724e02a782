"""LowNodeUtilization: requests (or NodeMetric usage) above targetThresholds move to underutilized nodes."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from fractions import Fraction
from typing import Any

import pytest

from descheduler import usagesources
from descheduler.framework import CycleReport, Reason
from descheduler.plugins.lownodeutilization import classify, order
from kube import objects, slo
from kube.classify import KubeQOS
from tests import builders
from tests.descheduler import fakes

NAME = "LowNodeUtilization"
D7_ARGS = {"thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 70}}
TAINT = "dedicated=db:NoSchedule"


def pods_on(
    node: str, *cpus: str, prefix: str | None = None, **overrides: Any
) -> list[objects.Pod]:
    """One pod per CPU request on `node`, named <prefix>-<i> (prefix defaults to the node)."""
    prefix = prefix or node
    return [
        builders.make_pod(f"{prefix}-{i}", node=node, cpu=cpu, owner_name=prefix, **overrides)
        for i, cpu in enumerate(cpus)
    ]


def d7_pods() -> list[objects.Pod]:
    """D7: A 7 x 500m (87.5%), B one 400m (10%), C 4 x 400m (40%)."""
    return [*pods_on("a", *["500m"] * 7), *pods_on("b", "400m"), *pods_on("c", *["400m"] * 4)]


def run(
    pods: Sequence[objects.Pod],
    args: dict[str, Any] | None = None,
    *,
    nodes: Sequence[objects.Node] | None = None,
    metrics: Sequence[slo.NodeMetric] = (),
    **top: Any,
) -> CycleReport:
    """One cycle with LowNodeUtilization as the only balance plugin."""
    return fakes.run_plugin(
        NAME,
        D7_ARGS if args is None else args,
        pods,
        point="balance",
        nodes=fakes.nodes("a", "b", "c") if nodes is None else nodes,
        node_metrics=metrics,
        **top,
    )


def skips(report: CycleReport) -> list[tuple[str, str]]:
    return [(s.pod, s.reason_code.value) for s in report.skipped]


def notes(report: CycleReport) -> list[tuple[str, str]]:
    return [(n.reason.value, n.detail) for n in report.notes]


def cpu_after(report: CycleReport) -> dict[str, int]:
    return {p.node: p.requests_after["cpu"] for p in report.projections}


# -- D7 -----------------------------------------------------------------------------


def test_d7_evicts_exactly_two_from_a() -> None:
    """D7: A 87.5% -> 75% -> 62.5%; two pods leave A for B, none leave B or C."""
    report = run(d7_pods())
    assert report.evicted_pods == ["default/a-0", "default/a-1"]
    assert {e.node for e in report.evictions} == {"a"}
    assert report.skipped == ()
    assert cpu_after(report) == {"a": 2500, "b": 1400}
    assert "cpu 87.50% (mark 70.00%)" in report.evictions[0].reason


def test_each_pod_goes_to_the_coolest_destination_as_it_is_then() -> None:
    """A's first pod warms C (7.5% -> 20%) past B (10%), so the second goes to B."""
    pods = [*pods_on("a", *["500m"] * 7), *pods_on("b", "400m"), *pods_on("c", "300m")]
    report = run(pods)
    assert report.evicted_pods == ["default/a-0", "default/a-1"]
    assert cpu_after(report) == {"a": 2500, "b": 900, "c": 800}


# -- arguments --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "evicted", "note"),
    [
        pytest.param(D7_ARGS, 2, None, id="d7"),
        pytest.param(
            {"thresholds": {"cpu": 5}, "targetThresholds": {"cpu": 70}},
            0,
            "no underutilized nodes",
            id="no-low",
        ),
        pytest.param(
            {"thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 90}},
            0,
            "no node is above targetThresholds",
            id="no-high",
        ),
        pytest.param(
            {**D7_ARGS, "numberOfNodes": 1},
            0,
            "1 underutilized nodes, numberOfNodes is 1",
            id="number-of-nodes",
        ),
        pytest.param(
            {**D7_ARGS, "evictionLimits": {"node": 1}},
            1,
            "evictionLimits.node 1 reached on node a",
            id="eviction-limit",
        ),
        pytest.param(
            {**D7_ARGS, "evictableNamespaces": {"exclude": ["kube-system"]}},
            2,
            None,
            id="ns-other-excluded",
        ),
        # mean 45.83%: low 35.83%, high 55.83% (2233m): A drops 3500 -> 2000 in three moves
        pytest.param(
            {
                "useDeviationThresholds": True,
                "thresholds": {"cpu": 10},
                "targetThresholds": {"cpu": 10},
            },
            3,
            None,
            id="deviation",
        ),
        pytest.param(
            {"thresholds": {"cpu": 20, "pods": 100}, "targetThresholds": {"cpu": 70, "pods": 100}},
            2,
            None,
            id="two-resources",
        ),
    ],
)
def test_argument_table(args: dict[str, Any], evicted: int, note: str | None) -> None:
    """D7's cluster under each argument: how many pods move, and the note when none can."""
    report = run(d7_pods(), args)
    assert len(report.evictions) == evicted
    assert {e.node for e in report.evictions} <= {"a"}
    assert [detail for _, detail in notes(report)] == ([note] if note else [])


def test_excluded_namespaces_are_reported_filtered() -> None:
    """evictableNamespaces.exclude: A's pods in it are filtered by the plugin, the others move."""
    pods = [
        *pods_on("a", "500m", "500m", prefix="sys", namespace="kube-system"),
        *pods_on("a", *["500m"] * 5),
    ]
    report = run(
        [*pods, *pods_on("b", "400m")],
        {**D7_ARGS, "evictableNamespaces": {"exclude": ["kube-system"]}},
    )
    assert report.evicted_pods == ["default/a-0", "default/a-1"]
    assert skips(report) == [("kube-system/sys-0", "filtered"), ("kube-system/sys-1", "filtered")]
    assert "excluded by evictableNamespaces" in report.skipped[0].detail


def test_memory_is_judged_in_percent_not_bytes() -> None:
    """A node over on memory only is drained until memory is back under its mark."""
    args = {"thresholds": {"cpu": 20, "memory": 20}, "targetThresholds": {"cpu": 70, "memory": 70}}
    heavy = pods_on("a", *["100m"] * 7, memory="2Gi")  # 14Gi of 16Gi: 87.5%
    report = run([*heavy, *pods_on("b", "100m")], args)
    assert report.evicted_pods == ["default/a-0", "default/a-1"]  # 14 -> 12 -> 10Gi (62.5%)


def test_sources_are_ordered_by_percentages() -> None:
    """A (cpu 95%, memory 25%) is hotter than D (cpu 5%, memory 75%) though D has more bytes."""
    args = {"thresholds": {"cpu": 20, "memory": 20}, "targetThresholds": {"cpu": 70, "memory": 70}}
    a = pods_on("a", *["950m"] * 4, memory="1Gi")
    d = pods_on("d", *["50m"] * 4, memory="3Gi")
    report = run([*a, *d], args, nodes=fakes.nodes("a", "b", "d"), maxNoOfPodsToEvictTotal=1)
    assert report.evicted_pods == ["default/a-0"]


def test_pods_that_free_nothing_are_skipped() -> None:
    """A BestEffort pod requests no CPU: evicting it cannot relieve A, so it stays (filtered)."""
    idle = builders.make_pod("a-idle", node="a", qos=KubeQOS.BEST_EFFORT, owner_name="idle")
    report = run([idle, *d7_pods()])
    assert report.evicted_pods == ["default/a-0", "default/a-1"]
    assert skips(report) == [("default/a-idle", "filtered")]
    assert "frees none of cpu" in report.skipped[0].detail


def test_a_destination_is_never_pushed_over_its_target() -> None:
    """B would pass 70% with the 2500m pod: it is skipped, the 1200m pod goes instead."""
    pods = [
        builders.make_pod("a-big", node="a", cpu="2500m", owner_name="big"),
        builders.make_pod("a-small", node="a", cpu="1200m", owner_name="small"),
        *pods_on("b", "400m"),
    ]
    report = run(pods, nodes=fakes.nodes("a", "b"))
    assert report.evicted_pods == ["default/a-small"]
    assert skips(report) == [("default/a-big", "would_overload_destination")]
    assert cpu_after(report) == {"a": 2500, "b": 1600}


def test_no_fitting_destination_means_no_eviction() -> None:
    """B is the only underutilized node and carries a taint A's pods do not tolerate: no_fit."""
    nodes = [
        builders.make_node("a"),
        builders.make_node("b", taints=[TAINT]),
        builders.make_node("c"),
    ]
    report = run(d7_pods(), nodes=nodes)
    assert report.evictions == ()
    assert set(skips(report)) == {(f"default/a-{i}", "no_fit") for i in range(7)}


def test_headroom_stops_the_drain() -> None:
    """A (10 CPUs) needs three moves, B has room below 70% for two: then a no_destination note."""
    nodes = [builders.make_node("a", cpu="10"), builders.make_node("b"), builders.make_node("c")]
    pods = [*pods_on("a", *["1200m"] * 8), *pods_on("b", "400m"), *pods_on("c", *["400m"] * 4)]
    report = run(pods, nodes=nodes)
    assert report.evicted_pods == ["default/a-0", "default/a-1"]  # 9600 -> 7200m, still 72%
    assert notes(report) == [
        (
            "no_destination",
            "underutilized nodes have no room left on cpu; node a stays above targetThresholds",
        )
    ]


def test_node_limit_of_the_framework_stops_the_node() -> None:
    """maxNoOfPodsToEvictPerNode 1: one pod leaves A, the next is limit_reached."""
    report = run(d7_pods(), maxNoOfPodsToEvictPerNode=1)
    assert report.evicted_pods == ["default/a-0"]
    assert skips(report) == [("default/a-1", "limit_reached")]


def test_unschedulable_low_node_is_no_destination() -> None:
    """A cordoned node below thresholds is not underutilized (upstream's rule)."""
    nodes = [
        builders.make_node("a"),
        builders.make_node("b", unschedulable=True),
        builders.make_node("c"),
    ]
    report = run(d7_pods(), nodes=nodes)
    assert report.evictions == ()
    assert notes(report) == [("no_destination", "no underutilized nodes")]


def test_metrics_utilization_without_a_reachable_source_moves_nothing() -> None:
    """metricsUtilization offline (no metrics-server source): noted, nothing judged or evicted."""
    report = run(d7_pods(), {**D7_ARGS, "metricsUtilization": {"source": "KubernetesMetrics"}})
    assert report.evicted_pods == []
    assert notes(report) == [
        (
            "metrics_expired",
            "cannot read KubernetesMetrics usage (no metrics-server source (offline));"
            " no node is judged this cycle",
        )
    ]


def test_metrics_server_timing_out_is_noted_not_a_plugin_error() -> None:
    """A metrics API read that times out (seen in the peers benchmark) moves nothing and is
    one metrics_expired note; the plugin does not fail."""
    report = fakes.run_plugin(
        NAME,
        {**D7_ARGS, "metricsUtilization": {"source": "KubernetesMetrics"}},
        d7_pods(),
        point="balance",
        nodes=fakes.nodes("a", "b", "c"),
        sources=usagesources.Sources(metrics_server=fakes.TimingOutMetricsServer()),
    )
    assert report.evicted_pods == []
    assert report.failures == ()
    assert [reason for reason, _ in notes(report)] == ["metrics_expired"]
    assert "Read timed out" in notes(report)[0][1]


# -- useNodeMetrics ------------------------------------------------------------------------


def usage_metrics(*, a_age: timedelta = timedelta(0)) -> list[slo.NodeMetric]:
    """D1's usage: A 3700m (1200, 1000, 600, 400, 300, 200), B 400m, C 2000m."""
    a_usage = dict(zip((f"a-{i}" for i in range(6)), (1200, 1000, 600, 400, 300, 200), strict=True))
    return [
        builders.make_nodemetric("a", pods=a_usage, update_time=fakes.NOW - a_age),
        builders.make_nodemetric("b", pods={"b-0": 400}, update_time=fakes.NOW),
        builders.make_nodemetric("c", pods={"c-0": 2000}, update_time=fakes.NOW),
    ]


USAGE_ARGS = {"useNodeMetrics": True, "thresholds": {"cpu": 30}, "targetThresholds": {"cpu": 70}}


def test_node_metrics_usage_drives_the_decision_and_the_projection() -> None:
    """A uses 3700m (92.5%): a-0 (1200m) moves to B; usage is projected A 2500m, B 1600m."""
    pods = [*pods_on("a", *["100m"] * 6), *pods_on("b", "100m"), *pods_on("c", "100m")]
    report = run(pods, USAGE_ARGS, metrics=usage_metrics())
    assert report.evicted_pods == ["default/a-0"]
    usage = {
        p.node: (p.usage_before.cpu, p.usage_after.cpu)
        for p in report.projections
        if p.usage_before is not None and p.usage_after is not None
    }
    assert usage == {"a": (3700, 2500), "b": (400, 1600), "c": (2000, 2000)}


def test_stale_node_metrics_leave_the_node_out() -> None:
    """A's NodeMetric is 300s old: A is neither source nor destination, reason metrics_expired."""
    pods = [*pods_on("a", *["100m"] * 6), *pods_on("b", "100m"), *pods_on("c", "100m")]
    report = run(pods, USAGE_ARGS, metrics=usage_metrics(a_age=timedelta(seconds=300)))
    assert report.evictions == ()
    assert [code for code, _ in notes(report)] == ["metrics_expired", "not_source"]
    assert "node a's NodeMetric is 300s old" in report.notes[0].detail


def test_a_pod_the_metric_does_not_report_is_not_moved() -> None:
    """A pod without a podsMetric entry has unknown usage: no_fit, the next pod goes."""
    unreported = builders.make_pod("a-unreported", node="a", owner_name="x", priority=None)
    pods = [unreported, *pods_on("a", *["100m"] * 6), *pods_on("b", "100m")]
    report = run(pods, USAGE_ARGS, metrics=usage_metrics())
    assert report.evicted_pods == ["default/a-0"]
    assert skips(report) == [("default/a-unreported", "no_fit")]
    assert "does not report the pod" in report.skipped[0].detail


def test_node_metrics_leave_out_pods_gone_from_the_node() -> None:
    """a's NodeMetric still lists a-0 (1200m), evicted since: a is at 62.5%, below target."""
    pods = [*pods_on("a", *["100m"] * 6), *pods_on("b", "100m"), *pods_on("c", "100m")]
    still_there = [p for p in pods if p.name != "a-0"]
    report = run(still_there, USAGE_ARGS, metrics=usage_metrics())
    assert report.evictions == ()
    assert notes(report) == [("not_source", "no node is above targetThresholds")]


# -- pure helpers -------------------------------------------------------------------------


def test_marks_and_classification_are_exact() -> None:
    """At exactly the mark a node is neither over target nor above the low mark."""
    capacity = {"cpu": 4000}
    marks = classify.static_marks({"cpu": 20}, {"cpu": 70})
    assert classify.is_under({"cpu": 800}, capacity, marks.low)
    assert not classify.is_under({"cpu": 801}, capacity, marks.low)
    assert not classify.is_over({"cpu": 2800}, capacity, marks.high)
    assert classify.over({"cpu": 2801}, capacity, marks.high) == ["cpu"]
    assert classify.is_under({}, {}, marks.low)  # a resource the node lacks reads 0%


def test_deviation_marks_clamp_to_0_and_100() -> None:
    """Mean +- deviation, clamped; the mean is over every node measured."""
    measured = [{"cpu": Fraction(90)}, {"cpu": Fraction(10)}]
    marks = classify.deviation_marks(measured, {"cpu": 60}, {"cpu": 60})
    assert (marks.low["cpu"], marks.high["cpu"]) == (Fraction(0), Fraction(100))
    marks = classify.deviation_marks(measured, {"cpu": 10}, {"cpu": 5})
    assert (marks.low["cpu"], marks.high["cpu"]) == (Fraction(40), Fraction(55))


def test_room_caps_judged_resources_at_their_mark() -> None:
    """Judged resources stop at the mark, the basic others at capacity."""
    room = classify.room(
        {"cpu": 1000, "memory": 10, "pods": 5},
        {"cpu": 4000, "memory": 100, "pods": 110},
        {"cpu": Fraction(70)},
        ("cpu", "memory", "pods"),
    )
    assert room == {"cpu": 1800, "memory": 90, "pods": 105}


def test_pod_order_is_upstreams_made_total() -> None:
    """No priority first, then low priority, BestEffort before Burstable before Guaranteed, then name."""
    pods = [
        builders.make_pod("g", qos=KubeQOS.GUARANTEED, priority=0),
        builders.make_pod("b2", priority=0),
        builders.make_pod("b1", priority=0),
        builders.make_pod("keep", priority=0, annotations={order.PREFER_NO_EVICTION: ""}),
        builders.make_pod("be", qos=KubeQOS.BEST_EFFORT, priority=0),
        builders.make_pod("high", priority=10),
        builders.make_pod("none", priority=None),
    ]
    ordered = [p.name for p in sorted(pods, key=order.eviction_key)]
    assert ordered == ["none", "be", "b1", "b2", "keep", "g", "high"]


def test_note_reasons_are_framework_codes() -> None:
    """The plugin's notes use the framework's reason codes."""
    report = run(d7_pods(), {"thresholds": {"cpu": 5}, "targetThresholds": {"cpu": 70}})
    assert report.reasons == [Reason.NO_DESTINATION]
