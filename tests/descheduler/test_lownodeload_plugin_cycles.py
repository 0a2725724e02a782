"""LowNodeLoad across cycles through the real Runner: D6 dry runs, anomaly, cool-down, limits.

The plugin's detector and cool-down live on the plugin instance, so these
tests run several `run_once` cycles on one harness, moving the injected clock
and refreshing the StaticSource between them (no sleeping).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from descheduler.framework import CycleReport, DisruptionBudget, Reason
from descheduler.plugins.lownodeload.classify import Track
from kube import eviction, objects, selectors
from tests.descheduler import fakes
from tests.descheduler.test_lownodeload_plugin import (
    D1,
    D1_ARGS,
    World,
    harness,
    skips,
    the_plugin,
    usage_cpu,
)

LOGGER = "descheduler.plugins.lownodeload"


def decided(report: CycleReport) -> tuple[list[str], list[tuple[str, Reason]]]:
    """What a cycle decided: the pods evicted, and every skip with its reason code."""
    return report.evicted_pods, [(s.pod, s.reason_code) for s in report.skipped]


# -- D6: dry runs ----------------------------------------------------------------------------


def with_budget(world: World) -> World:
    """D1, where a1000 (the first choice) is covered by a budget that allows no disruption."""
    labels = {"app": "guarded"}
    return World(world.usage, world.node_kw, {"a1000": {"labels": labels}}, world.age)


def guarded_pdb() -> DisruptionBudget:
    return DisruptionBudget(
        namespace="default",
        name="guarded",
        selector=selectors.LabelSelector.from_api({"matchLabels": {"app": "guarded"}}),
        disruptions_allowed=0,
        current_healthy=1,
        desired_healthy=1,
        expected_pods=1,
    )


def test_d6_dry_run_selects_the_real_runs_pods_and_writes_nothing() -> None:
    """D6: dryRun picks what the real run picks (PDB-blocked first choice included), no API call."""
    world = with_budget(World(D1))
    real_backend = fakes.FakeBackend(outcomes={"a1000": eviction.Outcome.PDB_BLOCKED})
    real = harness(world.source(pdbs=[guarded_pdb()]), backend=real_backend).runner.run_once()
    assert decided(real) == (
        ["default/a1200"],
        [("default/a1000", Reason.PDB_BLOCKED)],
    )

    dry = harness(world.source(pdbs=[guarded_pdb()]), dryRun=True)
    report = dry.runner.run_once()
    assert report.dry_run
    assert decided(report) == decided(real)
    assert usage_cpu(report) == usage_cpu(real) == {"A": (3700, 2500), "B": (400, 1600)}
    assert dry.backend.calls == []
    labels = {"strategy": "LowNodeLoad", "profile": "p1", "namespace": "default", "node": "A"}
    assert dry.sample("nodeqos_descheduler_pods_evicted_total", result="dry_run", **labels) == 1
    assert dry.sample("nodeqos_descheduler_pods_evicted_total", result="success", **labels) == 0


def test_d6_second_dry_run_cycle_decides_the_same() -> None:
    """D6: with the descheduler's dryRun, a second cycle reaches the same decisions."""
    h = harness(World(D1).source(), dryRun=True)
    first, second = h.runner.run_once(), h.runner.run_once()
    assert decided(first) == decided(second) == (["default/a1000"], [])
    assert usage_cpu(first) == usage_cpu(second) == {"A": (3700, 2700), "B": (400, 1400)}
    assert h.backend.calls == []
    assert the_plugin(h).cool_down.tracked == 0  # the pretended eviction cooled nothing


def test_a_real_eviction_cools_its_workload() -> None:
    """The same cycle for real: a1000's workload is cooling, so the next cycle takes a1200."""
    h = harness(World(D1).source())
    assert h.runner.run_once().evicted_pods == ["default/a1000"]
    assert the_plugin(h).cool_down.tracked == 1
    second = h.runner.run_once()
    assert decided(second) == (["default/a1200"], [("default/a1000", Reason.COOL_DOWN)])


def test_d6_plugin_dry_run_decides_the_same_every_cycle(caplog: pytest.LogCaptureFixture) -> None:
    """args.dryRun: the real run's pod, logged as a dry run, twice; nothing reaches the backend."""
    h = harness(World(D1).source(), {**D1_ARGS, "dryRun": True})
    with caplog.at_level(logging.INFO, logger=LOGGER):
        first, second = h.runner.run_once(), h.runner.run_once()
    would = [r.getMessage() for r in caplog.records if "would evict" in r.getMessage()]
    assert would == 2 * [
        "[dry-run] LowNodeLoad (profile p1) would evict pod default/a1000 from node A towards B: "
        "node A is overutilized: cpu usage 92.50% > high mark 70.00%"
    ]
    assert h.backend.calls == []
    assert first.evictions == second.evictions == ()
    assert first.skipped == second.skipped == ()
    # nothing moved: the projection shows the nodes as they are
    assert usage_cpu(first) == {"A": (3700, 3700), "B": (400, 400)}
    assert the_plugin(h).cool_down.tracked == 0


# -- anomaly detection across cycles -----------------------------------------------------------

ANOMALY_ARGS = {**D1_ARGS, "anomalyCondition": {"consecutiveAbnormalities": 3}}


def test_a_node_is_acted_on_at_its_third_hot_reading_then_reset() -> None:
    """consecutiveAbnormalities 3: two not_source cycles, an eviction, then the count starts over."""
    clock = fakes.FixedClock()
    world = World(D1)
    source = world.source(clock.now)
    h = harness(source, ANOMALY_ARGS, clock=clock)
    reports = []
    for _ in range(4):
        world.refresh(source, clock.now)
        reports.append(h.runner.run_once())
        clock.advance(seconds=20)
    assert [r.evicted_pods for r in reports] == [[], [], ["default/a1000"], []]
    assert [[(n.reason, n.detail) for n in r.notes] for r in reports] == [
        [
            (
                Reason.NOT_SOURCE,
                f"node A: cpu usage 92.50% > high mark 70.00%; hot for {n} of 3 readings",
            )
        ]
        for n in (1, 2)
    ] + [[]] + [
        [
            (
                Reason.NOT_SOURCE,
                "node A: cpu usage 92.50% > high mark 70.00%; hot for 1 of 3 readings",
            )
        ]
    ]
    assert usage_cpu(reports[0]) == {"A": (3700, 3700), "B": (400, 400)}


def test_a_cool_reading_breaks_the_streak() -> None:
    """Hot, hot, cool, hot: the streak starts again; nothing is evicted."""
    clock = fakes.FixedClock()
    cool = World({"A": {"a2000": 2000}, "B": {"b400": 400}, "C": {"c2000": 2000}})
    source = World(D1).source(clock.now)
    h = harness(source, ANOMALY_ARGS, clock=clock)
    for world in (World(D1), World(D1), cool, World(D1)):
        world.refresh(source, clock.now)
        report = h.runner.run_once()
        assert report.evictions == ()
        clock.advance(seconds=20)
    assert the_plugin(h).detector.status(objects.NodeName("A"), Track.NODE).streak == 1


def test_dry_run_keeps_the_detector_record() -> None:
    """A pretended relief does not reset the node: the next dry-run cycle acts on it again."""
    clock = fakes.FixedClock()
    world = World(D1)
    source = world.source(clock.now)
    h = harness(source, {**ANOMALY_ARGS, "dryRun": True}, clock=clock)
    for _ in range(4):
        world.refresh(source, clock.now)
        report = h.runner.run_once()
        clock.advance(seconds=20)
    assert report.notes == ()  # the fourth cycle: A is still a source, no "not_source"
    assert the_plugin(h).detector.status(objects.NodeName("A"), Track.NODE).state == "abnormal"


# -- cool-down across cycles -------------------------------------------------------------------


def test_cool_down_protects_a_workload_for_five_minutes() -> None:
    """After web-a goes, its sibling web-b is skipped (cool_down) until the period ends."""
    web = {"owner_name": "web", "priority": 0}
    other = {"priority": 10}  # tried after the web pods
    pod_kw: dict[str, dict[str, Any]] = {"web-a": web, "web-b": web, "x1000": other, "y1700": other}
    first = World(
        {"A": {"web-a": 1000, "web-b": 1000, "y1700": 1700}, "B": {"b400": 400}}, pod_kw=pod_kw
    )
    # web-a was evicted (its replacement landed elsewhere); A is hot again with a newcomer
    later = World(
        {"A": {"web-b": 1000, "x1000": 1000, "y1700": 1700}, "B": {"b400": 400}}, pod_kw=pod_kw
    )
    clock = fakes.FixedClock()
    source = first.source(clock.now)
    h = harness(source, clock=clock)
    assert h.runner.run_once().evicted_pods == ["default/web-a"]

    clock.advance(minutes=4)
    later.refresh(source, clock.now)
    second = h.runner.run_once()
    assert second.evicted_pods == ["default/x1000"]
    [skip] = second.skipped
    assert (skip.pod, skip.reason_code) == ("default/web-b", Reason.COOL_DOWN)
    assert skip.detail == "a pod of its workload was evicted; cool-down until 2024-05-02T12:05:00Z"

    clock.advance(minutes=1)
    later.refresh(source, clock.now)
    assert h.runner.run_once().evicted_pods == ["default/web-b"]


def test_a_refused_eviction_starts_no_cool_down() -> None:
    """The API refused web-a (PDB): its workload is not cooling, web-b goes in the same cycle."""
    web = {"owner_name": "web"}
    world = World(
        {"A": {"web-a": 1000, "web-b": 1000, "y1700": 1700}, "B": {"b400": 400}},
        pod_kw={"web-a": web, "web-b": web, "y1700": {"priority": 10}},
    )
    backend = fakes.FakeBackend(outcomes={"web-a": eviction.Outcome.PDB_BLOCKED})
    h = harness(world.source(), backend=backend)
    report = h.runner.run_once()
    assert backend.calls == ["default/web-a", "default/web-b"]
    assert report.evicted_pods == ["default/web-b"]
    assert skips(report) == [("web-a", "LowNodeLoad", Reason.PDB_BLOCKED)]


# -- eviction limits --------------------------------------------------------------------------

# A 3700m (92.5%): 900m over and no single pod covers it, so it needs two evictions;
# H 2900m (72.5%): 100m over; B and C are cool.
TWO_HOT = World(
    {
        "A": {"a800": 800, "a700": 700, "a650": 650, "a600": 600, "a550": 550, "a400": 400},
        "H": {"h2000": 2000, "h900": 900},
        "B": {"b0": 0},
        "C": {"c100": 100},
    }
)


def test_per_node_limit_moves_on_to_the_next_source() -> None:
    """maxNoOfPodsToEvictPerNode 1: one pod from A; the next is limit_reached, A stops, then H."""
    h = harness(TWO_HOT.source(), maxNoOfPodsToEvictPerNode=1)
    report = h.runner.run_once()
    assert report.evicted_pods == ["default/a800", "default/h900"]
    assert h.backend.calls == ["default/a800", "default/h900"]
    # A is still 100m over: a400 (the smallest pod covering it) is refused by the cap,
    # and A's other candidates are not tried at all
    assert skips(report) == [("a400", "LowNodeLoad", Reason.LIMIT_REACHED)]
    assert [s.detail for s in report.skipped] == ["maxNoOfPodsToEvictPerNode reached on node A"]
    assert [(n.reason, n.node, n.detail) for n in report.notes] == [
        (
            Reason.LIMIT_REACHED,
            "A",
            "node A: cpu usage 92.50% > high mark 70.00%; "
            "1 evicted, then maxNoOfPodsToEvictPerNode reached on node A",
        )
    ]
    assert usage_cpu(report)["A"] == (3700, 2900)


def test_per_node_limit_resets_next_cycle() -> None:
    """The next cycle counts anew: A, still 100m over without a800, gives one more pod."""
    source = TWO_HOT.source()
    h = harness(source, maxNoOfPodsToEvictPerNode=1)
    h.runner.run_once()
    usage = {node: dict(pods) for node, pods in TWO_HOT.usage.items()}
    del usage["A"]["a800"], usage["H"]["h900"]  # evicted; their replacements run elsewhere
    World(usage).refresh(source, fakes.NOW)
    again = h.runner.run_once()
    assert again.evicted_pods == ["default/a400"]  # the smallest pod covering 100m
    assert again.skipped == ()


def test_total_limit_stops_everything_after_it() -> None:
    """maxNoOfPodsToEvictTotal 1: A's pod goes; H's first candidate is refused, the plan stops."""
    world = World(
        {
            "A": {"a1000": 1000, "a900": 900, "a1800": 1800},
            "H": {"h2000": 2000, "h900": 900},
            "B": {"b0": 0},
            "C": {"c100": 100},
        },
        pod_kw={"a1800": {"priority": 10}},
    )  # A 3700m is drained first (hottest): a900 covers its excess exactly
    h = harness(world.source(), maxNoOfPodsToEvictTotal=1)
    report = h.runner.run_once()
    assert report.evicted_pods == ["default/a900"]
    assert h.backend.calls == ["default/a900"]
    assert skips(report) == [("h900", "LowNodeLoad", Reason.LIMIT_REACHED)]
    assert [s.detail for s in report.skipped] == ["maxNoOfPodsToEvictTotal reached"]
    [left_hot, note] = report.notes
    assert (left_hot.reason, left_hot.node) == (Reason.LIMIT_REACHED, "H")
    assert left_hot.detail.endswith("; maxNoOfPodsToEvictTotal reached")
    assert (note.reason, note.plugin, note.profile) == (Reason.LIMIT_REACHED, "LowNodeLoad", "p1")
    assert note.detail == "maxNoOfPodsToEvictTotal reached: 1 more candidate was not tried"
    assert (
        h.sample(
            "nodeqos_descheduler_decisions_total", plugin="LowNodeLoad", reason="limit_reached"
        )
        == 1
    )
