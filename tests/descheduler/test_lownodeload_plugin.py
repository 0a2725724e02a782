"""LowNodeLoad through the real Runner: scenarios D1-D3, records, projections, earlier evictions.

Every test builds a StaticSource of nodes, pods and NodeMetrics (`World`) and
runs whole cycles with the in-tree registry, DefaultEvictor at filter and
preEvictionFilter, and `fakes.FakeBackend` standing in for the Eviction API.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest

from descheduler import framework, plugins
from descheduler.framework import CycleReport, Handle, Reason, Snapshot
from descheduler.plugins import lownodeload
from descheduler.plugins.lownodeload.plugin import unmeasured_resources
from kube import eviction, objects
from tests import builders
from tests.descheduler import fakes

D1_ARGS: Mapping[str, Any] = {
    "lowThresholds": {"cpu": 30},
    "highThresholds": {"cpu": 70},
    "anomalyCondition": {"consecutiveAbnormalities": 1},
}
D1_A = {"a1200": 1200, "a1000": 1000, "a600": 600, "a400": 400, "a300": 300, "a200": 200}
D1 = {"A": D1_A, "B": {"b400": 400}, "C": {"c2000": 2000}}


@dataclass
class World:
    """Nodes and their pods, each pod using the CPU millicores its NodeMetric reports.

    Every node is Ready with 4000m / 16Gi; memory usage is 10%; pods are
    ReplicaSet-owned and request 100m (tests/builders defaults). `age` is how
    old each node's NodeMetric is when the source is built (30s by default).
    """

    usage: Mapping[str, Mapping[str, int]]
    node_kw: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    pod_kw: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    age: Mapping[str, timedelta] = field(default_factory=dict)

    def nodes(self) -> list[objects.Node]:
        return [builders.make_node(n, **self.node_kw.get(n, {})) for n in self.usage]

    def pods(self) -> list[objects.Pod]:
        return [
            builders.make_pod(p, node=n, **self.pod_kw.get(p, {}))
            for n, pods in self.usage.items()
            for p in pods
        ]

    def metrics(self, now: datetime) -> list[Any]:
        def key(pod: str) -> str:
            return f"{self.pod_kw.get(pod, {}).get('namespace', 'default')}/{pod}"

        return [
            builders.make_nodemetric(
                n,
                pods={key(p): cpu for p, cpu in pods.items()},
                update_time=now - self.age.get(n, timedelta(seconds=30)),
            )
            for n, pods in self.usage.items()
        ]

    def source(self, now: datetime = fakes.NOW, **extra: Any) -> framework.StaticSource:
        return framework.StaticSource(
            nodes=self.nodes(), pods=self.pods(), node_metrics=self.metrics(now), **extra
        )

    def refresh(self, source: framework.StaticSource, now: datetime) -> None:
        """The cluster as it is now: these pods, NodeMetrics freshly reported."""
        source.replace(nodes=self.nodes(), pods=self.pods(), node_metrics=self.metrics(now))


def lnl_policy(
    args: Mapping[str, Any] = D1_ARGS, *, deschedule: Iterable[str] = (), **top: Any
) -> dict[str, Any]:
    """One profile: LowNodeLoad at balance with `args`, DefaultEvictor filtering (its defaults)."""
    profile = {
        "name": "p1",
        "plugins": {
            "deschedule": {"enabled": list(deschedule)},
            "balance": {"enabled": [lownodeload.NAME]},
        },
        "pluginConfig": [{"name": lownodeload.NAME, "args": dict(args)}],
    }
    return fakes.policy(profiles=[profile], **top)


def harness(
    source: framework.ClusterSource,
    args: Mapping[str, Any] = D1_ARGS,
    *,
    registry: framework.Registry | None = None,
    backend: fakes.FakeBackend | None = None,
    clock: fakes.FixedClock | None = None,
    deschedule: Iterable[str] = (),
    **top: Any,
) -> fakes.Harness:
    return fakes.harness(
        lnl_policy(args, deschedule=deschedule, **top),
        registry or plugins.registry(),
        source,
        backend=backend,
        clock=clock,
    )


def the_plugin(h: fakes.Harness) -> lownodeload.LowNodeLoad:
    [(_, plugin)] = h.runner.profiles[0].balance
    assert isinstance(plugin, lownodeload.LowNodeLoad)
    return plugin


def usage_cpu(report: CycleReport) -> dict[str, tuple[int, int]]:
    """Projected CPU usage (before, after) per node that has a usage projection."""
    return {
        p.node: (p.usage_before["cpu"], p.usage_after["cpu"])
        for p in report.projections
        if p.usage_before is not None and p.usage_after is not None
    }


def skips(report: CycleReport) -> list[tuple[str, str, Reason]]:
    """(pod name, plugin, reason code) of every skip, in order."""
    return [(s.pod.split("/")[1], s.plugin, s.reason_code) for s in report.skipped]


# -- wiring ----------------------------------------------------------------------------


def test_the_registry_builds_it() -> None:
    """The in-tree registry has a factory for LowNodeLoad; the package exports the class."""
    entry = plugins.registry().entry(lownodeload.NAME)
    assert entry.factory is lownodeload.factory
    h = harness(World(D1).source())
    assert the_plugin(h).name == "LowNodeLoad"


def test_factory_refuses_other_args() -> None:
    """Args of another plugin are a programming error."""
    with pytest.raises(TypeError, match="LowNodeLoad needs LowNodeLoadArgs"):
        lownodeload.factory(fakes.NoArgs(), None)  # type: ignore[arg-type]


# -- D1 --------------------------------------------------------------------------------


def test_d1_evicts_exactly_the_pod_that_covers_the_excess() -> None:
    """D1: one eviction, the 1000m pod; A projected at 2700m (67.5%), B at 1400m."""
    h = harness(World(D1).source())
    report = h.runner.run_once()
    assert report.evicted_pods == ["default/a1000"]
    assert h.backend.calls == ["default/a1000"]
    [evicted] = report.evictions
    assert (evicted.node, evicted.plugin, evicted.profile) == ("A", "LowNodeLoad", "p1")
    assert evicted.reason == "node A is overutilized: cpu usage 92.50% > high mark 70.00%"
    assert (h.backend.options[0].reason, h.backend.options[0].destination) == (evicted.reason, "B")
    assert report.skipped == ()
    assert report.notes == ()
    assert usage_cpu(report) == {"A": (3700, 2700), "B": (400, 1400)}
    assert usage_cpu(report)["A"][1] * 100 / 4000 == 67.5
    requests = {
        p.node: (p.requests_before["cpu"], p.requests_after["cpu"]) for p in report.projections
    }
    assert requests == {"A": (600, 500), "B": (100, 200)}
    labels = {"strategy": "LowNodeLoad", "profile": "p1", "namespace": "default", "node": "A"}
    assert h.sample("nodeqos_descheduler_pods_evicted_total", result="success", **labels) == 1


def test_d1_report_is_json_ready_with_usage() -> None:
    """The explain form carries usage before and after for A and B (what `simulate` prints)."""
    report = harness(World(D1).source()).runner.run_once()
    projections = {p["node"]: p for p in report.to_dict()["projections"]}
    assert projections["A"]["usage_before"]["cpu"] == "3700m"
    assert projections["A"]["usage_after"]["cpu"] == "2700m"
    assert projections["B"]["usage_after"]["cpu"] == "1400m"
    assert "C" not in projections  # neither source nor destination


# -- D2 --------------------------------------------------------------------------------


def test_d2_no_destination_no_eviction() -> None:
    """D2: B at 1300m (32.5%) is above low: zero evictions, reason "no underutilized nodes"."""
    world = World({"A": D1_A, "B": {"b1300": 1300}, "C": {"c2000": 2000}})
    h = harness(world.source())
    report = h.runner.run_once()
    assert report.evictions == ()
    assert h.backend.calls == []
    assert report.skipped == ()
    [pool, node] = report.notes
    assert (pool.reason, pool.plugin, pool.profile) == (Reason.NO_DESTINATION, "LowNodeLoad", "p1")
    assert (pool.detail, pool.node) == ("no underutilized nodes; hot nodes left as they are: A", "")
    assert (node.reason, node.node) == (Reason.NO_DESTINATION, "A")
    assert node.detail == "node A: no underutilized nodes for its node load"
    assert (
        h.sample(
            "nodeqos_descheduler_unrelieved_nodes_total",
            plugin="LowNodeLoad",
            reason="no_destination",
        )
        == 1
    )
    assert usage_cpu(report) == {"A": (3700, 3700)}


def test_d2_tainted_only_destination_every_candidate_no_fit() -> None:
    """D2 variant: B is NoSchedule-tainted, nodeFit on: zero evictions, each candidate no_fit once."""
    world = World(D1, node_kw={"B": {"taints": ["dedicated=db:NoSchedule"]}})
    h = harness(world.source(), {**D1_ARGS, "nodeFit": True})
    report = h.runner.run_once()
    assert report.evictions == ()
    assert h.backend.calls == []
    assert sorted(skips(report)) == sorted((p, "LowNodeLoad", Reason.NO_FIT) for p in D1_A)
    assert {s.detail for s in report.skipped} == {"B: untolerated taint dedicated=db:NoSchedule"}
    assert [(n.reason, n.node, n.detail) for n in report.notes] == [
        (
            Reason.NOTHING_EVICTABLE,
            "A",
            "node A: cpu usage 92.50% > high mark 70.00%; no candidate could go: 6 no_fit",
        )
    ]
    assert (
        h.sample("nodeqos_descheduler_decisions_total", plugin="LowNodeLoad", reason="no_fit") == 6
    )


def test_no_destination_note_names_ten_hot_nodes() -> None:
    """A big cluster's no_destination note names ten hot nodes and counts the rest."""
    hot = {f"H{i:02d}": {f"h{i:02d}": 3700} for i in range(12)}
    report = harness(World({**hot, "M": {"m2000": 2000}}).source()).runner.run_once()
    [note, *per_node] = report.notes
    names = ", ".join(f"H{i:02d}" for i in range(10))
    assert note.detail == f"no underutilized nodes; hot nodes left as they are: {names} and 2 more"
    assert [n.node for n in per_node] == [f"H{i:02d}" for i in range(12)]  # every one, by name


# -- D3 --------------------------------------------------------------------------------

D3_ARGS = {**D1_ARGS, "lowThresholds": {"cpu": 45}, "nodeMetricExpirationSeconds": 180}


def test_d3_stale_metrics_are_ignored_then_fresh_ones_count() -> None:
    """D3: A's 95% is 300s old: not a source, not a destination; a fresh 40% makes it a destination."""
    hot = {"h1000": 1000, "h2600": 2600}  # H: 90%
    stale = World(
        {"A": {"a3800": 3800}, "H": hot, "M": {"m2400": 2400}}, age={"A": timedelta(seconds=300)}
    )
    clock = fakes.FixedClock()
    source = stale.source(clock.now)
    h = harness(source, D3_ARGS, clock=clock)
    first = h.runner.run_once()
    assert first.evictions == ()
    assert h.backend.calls == []
    assert first.skipped == ()  # A's pods were never candidates
    assert [(n.reason, n.detail) for n in first.notes] == [
        (Reason.NO_DESTINATION, "no underutilized nodes; hot nodes left as they are: H"),
        (Reason.METRICS_EXPIRED, "node A's NodeMetric is 300s old; neither source nor destination"),
        (Reason.NO_DESTINATION, "node H: no underutilized nodes for its node load"),
    ]
    assert "A" not in usage_cpu(first)

    clock.advance(seconds=60)
    World({"A": {"a1600": 1600}, "H": hot, "M": {"m2400": 2400}}).refresh(source, clock.now)
    second = h.runner.run_once()
    assert second.evicted_pods == ["default/h1000"]
    assert second.notes == ()
    assert usage_cpu(second) == {"A": (1600, 2600), "H": (3600, 2600)}


def test_missing_nodemetric_is_reported_per_node() -> None:
    """A node without a NodeMetric is a metrics_expired note naming it; the rest goes on."""
    world = World(D1)
    source = world.source()
    source.replace(node_metrics=[m for m in world.metrics(fakes.NOW) if m.name != "C"])
    report = harness(source).runner.run_once()
    assert report.evicted_pods == ["default/a1000"]
    assert [(n.reason, n.detail) for n in report.notes] == [
        (Reason.METRICS_EXPIRED, "node C has no NodeMetric; neither source nor destination")
    ]


# -- one record per candidate ------------------------------------------------------------


def test_every_candidate_gets_exactly_one_record() -> None:
    """Filtered (DaemonSet), PDB-refused by the API, then evicted: one record each, none twice."""
    world = World(
        {"A": {"ds": 1500, "a1000": 1000, "a900": 900, "a300": 300}, "B": {"b400": 400}},
        pod_kw={"ds": {"owner": "DaemonSet", "priority": -1}},
    )  # A 3700m; ds ranks first (lowest priority), then a900 (covers the 900m excess exactly)
    backend = fakes.FakeBackend(outcomes={"a900": eviction.Outcome.PDB_BLOCKED})
    h = harness(world.source(), backend=backend)
    report = h.runner.run_once()
    assert backend.calls == ["default/a900", "default/a1000"]
    assert report.evicted_pods == ["default/a1000"]
    assert skips(report) == [
        ("a900", "LowNodeLoad", Reason.PDB_BLOCKED),  # recorded by the evictor
        ("ds", "LowNodeLoad", Reason.FILTERED),  # recorded by the plugin
    ]
    assert report.skipped[1].detail.startswith("DefaultEvictor: ")
    assert usage_cpu(report) == {"A": (3700, 2700), "B": (400, 1400)}


def test_daemonset_owner_without_controller_flag_is_never_moved() -> None:
    """A DaemonSet owner reference protects the pod even without `controller: true`."""
    world = World(
        {"A": {"ds": 1500, "a1000": 1000, "a900": 900, "a300": 300}, "B": {"b400": 400}},
        pod_kw={"ds": {"owner": "DaemonSet", "owner_controller": False, "priority": -1}},
    )
    report = harness(world.source()).runner.run_once()
    assert report.evicted_pods == ["default/a900"]
    assert skips(report) == [("ds", "LowNodeLoad", Reason.FILTERED)]
    assert report.skipped[0].detail == "DefaultEvictor: DaemonSet pod"


def test_pods_that_left_since_the_report_do_not_keep_a_node_hot() -> None:
    """A's NodeMetric still lists a 1500m pod that is gone: A is at 47.5%, nothing moves."""
    world = World({"A": {"a1000": 1000, "a900": 900}, "B": {"b400": 400}})
    metrics = world.metrics(fakes.NOW)
    metrics[0] = builders.make_nodemetric(
        "A", pods={"a1000": 1000, "a900": 900, "gone": 1500}, update_time=fakes.NOW
    )
    source = framework.StaticSource(nodes=world.nodes(), pods=world.pods(), node_metrics=metrics)
    report = harness(source).runner.run_once()
    assert (report.evicted_pods, report.skipped) == ([], ())
    assert "A" not in usage_cpu(report)  # neither source nor destination


def test_plugin_args_filters_are_recorded() -> None:
    """evictableNamespaces excludes a pod: a `filtered` skip saying so, and the next pod goes."""
    world = World(D1, pod_kw={"a1000": {"namespace": "kube-system"}})
    args = {**D1_ARGS, "evictableNamespaces": {"exclude": ["kube-system"]}}
    report = harness(world.source(), args).runner.run_once()
    assert report.evicted_pods == ["default/a1200"]
    [skip] = report.skipped
    assert (skip.pod, skip.reason_code) == ("kube-system/a1000", Reason.FILTERED)
    assert skip.detail == "namespace kube-system is excluded by evictableNamespaces"


# -- the shared snapshot ----------------------------------------------------------------


def test_earlier_evictions_in_the_cycle_count() -> None:
    """A deschedule plugin moved C's 2000m pod to B first: B (60%) is no longer low, C (0%) is."""

    def mover(name: str, snapshot: Snapshot, handle: Handle) -> None:
        [pod] = snapshot.pods_on("C")
        assert handle.evictor.evict(pod, plugin=name, reason="test", destination="B")

    registry = fakes.registry_with(Mover=mover)
    h = harness(World(D1).source(), registry=registry, deschedule=["Mover"])
    report = h.runner.run_once()
    assert report.evicted_pods == ["default/c2000", "default/a1000"]
    assert [e.plugin for e in report.evictions] == ["Mover", "LowNodeLoad"]
    assert usage_cpu(report) == {"A": (3700, 2700), "C": (2000, 1000)}
    assert report.notes == ()


def test_earlier_eviction_from_the_hot_node_relieves_it() -> None:
    """A deschedule plugin already evicted A's 1200m pod: A is at 62.5%, LowNodeLoad does nothing."""

    def evict_big(name: str, snapshot: Snapshot, handle: Handle) -> None:
        [pod] = [p for p in snapshot.pods_on("A") if p.name == "a1200"]
        assert handle.evictor.evict(pod, plugin=name, reason="test")

    registry = fakes.registry_with(EvictBig=evict_big)
    h = harness(World(D1).source(), registry=registry, deschedule=["EvictBig"])
    report = h.runner.run_once()
    assert report.evicted_pods == ["default/a1200"]
    assert report.notes == ()
    assert report.skipped == ()


# -- paused ----------------------------------------------------------------------------


def test_paused_does_nothing(caplog: pytest.LogCaptureFixture) -> None:
    """paused: no plan, no eviction, one log line."""
    h = harness(World(D1).source(), {**D1_ARGS, "paused": True})
    with caplog.at_level(logging.INFO, logger="descheduler.plugins.lownodeload"):
        report = h.runner.run_once()
    assert (report.evictions, report.skipped, report.notes) == ((), (), ())
    assert h.backend.calls == []
    assert "LowNodeLoad (profile p1) is paused" in caplog.text


# -- resources a Koordinator config may name ----------------------------------------------


def test_pods_threshold_counts_the_pods_on_the_node() -> None:
    """`pods` is the pod count against allocatable pods: A (6 of 10) gives one pod to B (1)."""
    world = World(
        {"A": {f"a{i}": 100 for i in range(6)}, "B": {"b0": 100}},
        node_kw={"A": {"pods": "10"}, "B": {"pods": "10"}},
    )
    args = {
        "lowThresholds": {"pods": 30},
        "highThresholds": {"pods": 50},
        "anomalyCondition": {"consecutiveAbnormalities": 1},
    }
    report = harness(world.source(), args).runner.run_once()
    assert len(report.evicted_pods) == 1
    after = {p.node: p.usage_after for p in report.projections if p.usage_after is not None}
    before = {p.node: p.usage_before for p in report.projections if p.usage_before is not None}
    assert (before["A"]["pods"], before["B"]["pods"]) == (6, 1)
    assert (after["A"]["pods"], after["B"]["pods"]) == (5, 2)


def test_thresholds_no_agent_reports_are_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    """A threshold on ephemeral-storage or an extended resource warns once at start-up."""
    args = {
        "lowThresholds": {"cpu": 30, "pods": 30, "ephemeral-storage": 30},
        "highThresholds": {"cpu": 70, "pods": 50, "ephemeral-storage": 60},
    }
    with caplog.at_level(logging.WARNING, logger="descheduler.plugins.lownodeload"):
        harness(World(D1).source(), args)
    assert "thresholds on ephemeral-storage read the NodeMetric" in caplog.text
    marks = {"cpu": 1, "memory": 2, "pods": 3}
    measured = lownodeload.Args.from_mapping({"lowThresholds": marks, "highThresholds": marks})
    assert unmeasured_resources(measured) == []


# -- every hot node left hot says why ---------------------------------------------------------


def test_second_hot_node_finds_the_only_destination_full() -> None:
    """A's move fills B; H's candidates would all overload it: H's note says no_destination_headroom."""
    world = World(
        {
            "A": {"a1600": 1600, "a1200": 1200, "a900": 900},  # 92.5%, 900m over
            "H": {"h2000": 2000, "h1600": 1600},  # 90%, 800m over
            "B": {"b1000": 1000},  # 25%: 1800m of headroom under 70%
        }
    )
    h = harness(world.source())
    report = h.runner.run_once()
    assert report.evicted_pods == ["default/a900"]
    [note] = report.notes
    assert (note.reason, note.node, note.plugin) == (
        Reason.NO_DESTINATION_HEADROOM,
        "H",
        "LowNodeLoad",
    )
    assert note.detail == (
        "node H: cpu usage 90.00% > high mark 70.00%; "
        "each of the 2 candidates would overload every destination"
    )
    assert note.to_dict()["node"] == "H"
    assert (
        h.sample(
            "nodeqos_descheduler_unrelieved_nodes_total",
            plugin="LowNodeLoad",
            reason="no_destination_headroom",
        )
        == 1
    )


def test_headroom_used_up_stops_the_drain_with_a_reason() -> None:
    """H (hottest) fills B past its high mark; A is then not drained at all, and says why."""
    world = World(
        {
            "A": {"a1800": 1800, "a1000": 1000, "a900": 900},  # 92.5%, 900m over
            "H": {f"h{i}": 950 for i in range(4)},  # 95%, 1000m over, no pod covers it
            "B": {"b1000": 1000},  # 25%: 1800m of headroom
        }
    )
    args = {**D1_ARGS, "nodeFit": False}
    report = harness(world.source(), args).runner.run_once()
    assert report.evicted_pods == ["default/h0", "default/h1"]
    assert usage_cpu(report)["B"] == (1000, 2900)
    [note] = report.notes
    assert (note.reason, note.node) == (Reason.NO_DESTINATION_HEADROOM, "A")
    assert note.detail == (
        "node A: cpu usage 92.50% > high mark 70.00%; "
        "the destinations' headroom under their high marks is used up"
    )
