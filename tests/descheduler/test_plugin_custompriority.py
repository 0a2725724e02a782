"""CustomPriority: level order, destinations, DrainNode reservations, early stop, scope, caps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from descheduler import framework
from descheduler.framework import Reason
from kube import objects
from tests import builders
from tests.descheduler import fakes

GI = 1 << 30
ORDER = [
    {"name": level, "nodeSelector": {"matchLabels": {"tier": level}}}
    for level in ("gold", "silver", "bronze")
]


def node(name: str, tier: str, cpu: int = 1000) -> objects.Node:
    return builders.make_node(name, cpu=f"{cpu}m", memory=str(GI), labels={"tier": tier})


def pod(name: str, node: str, cpu: int = 100, **overrides: Any) -> objects.Pod:
    return builders.make_pod(name, node=node, cpu=f"{cpu}m", memory="1Mi", **overrides)


def run(
    args: dict[str, Any], nodes: Sequence[objects.Node], pods: Sequence[objects.Pod], **top: Any
) -> framework.CycleReport:
    caps = {"maxNoOfPodsToEvictPerNode": 100, "maxNoOfPodsToEvictTotal": 100, **top}
    return fakes.run_plugin(
        "CustomPriority",
        {"evictionOrder": ORDER, **args},
        pods,
        point="balance",
        nodes=nodes,
        evictor={"nodeFit": False},
        **caps,
    )


def test_each_level_drains_into_every_cheaper_level_in_order() -> None:
    """gold goes to silver first (bronze when silver is full); silver goes to bronze."""
    nodes = [node("g", "gold"), node("s", "silver", cpu=150), node("b", "bronze")]
    pods = [pod("g1", "g"), pod("g2", "g"), pod("s1", "s", cpu=50)]
    report = run({}, nodes, pods)
    assert report.evicted_pods == ["default/g1", "default/g2", "default/s1"]
    moved = {p.node: p for p in report.projections}
    assert moved["s"].requests_after["cpu"] == 100  # s1 (50m) left, g1 (100m) arrived
    assert moved["b"].requests_after["cpu"] == 150  # g2 and s1


def test_nodes_matching_no_level_are_neither_source_nor_target() -> None:
    """A node outside every level keeps its pods and receives none."""
    nodes = [node("g", "gold"), node("x", "other"), node("b", "bronze", cpu=50)]
    report = run({}, nodes, [pod("g1", "g"), pod("x1", "x")])
    assert report.evicted_pods == []
    assert [(s.pod, s.reason_code) for s in report.skipped] == [("default/g1", Reason.NO_FIT)]


def test_drain_node_reserves_room_for_the_whole_node() -> None:
    """Two 300m pods, one 500m target: each fits alone, not together, so none moves."""
    nodes = [node("g", "gold"), node("s", "silver", cpu=500)]
    report = run({"mode": "DrainNode"}, nodes, [pod("a", "g", 300), pod("b", "g", 300)])
    assert report.evicted_pods == []
    assert any("not drained: pod default/b" in n.detail for n in report.notes)
    best_effort = run({}, nodes, [pod("a", "g", 300), pod("b", "g", 300)])
    assert best_effort.evicted_pods == ["default/a"]


def test_best_effort_stops_after_five_misses_in_a_row() -> None:
    """Upstream's early stop: five pods that fit nowhere end the node, even before a small one."""
    nodes = [node("g", "gold", cpu=90_000), node("s", "silver", cpu=1000)]
    pods = [pod(f"big{i}", "g", 2000) for i in range(4)] + [pod("small", "g", 3000)]
    pods += [pod("tiny", "g", 10)]
    # sorted smallest first: tiny goes; then 5 misses (2000m x4, 3000m)
    assert run({}, nodes, pods).evicted_pods == ["default/tiny"]
    five = [pod(f"big{i}", "g", 2000) for i in range(5)]
    report = run({}, [node("g", "gold", cpu=90_000), node("s", "silver", cpu=1000)], five)
    assert any("5 pods in a row" in n.detail for n in report.notes)


def test_scope_and_caps() -> None:
    """evictableNamespaces and podSelectors filter with a reason; the total cap stops the plugin."""
    nodes = [node("g", "gold"), node("s", "silver")]
    pods = [
        pod("a", "g", namespace="kube-system"),
        pod("b", "g", labels={"app": "db"}),
        pod("c", "g", labels={"app": "web"}),
        pod("d", "g", labels={"app": "web"}),
    ]
    args = {
        "evictableNamespaces": {"exclude": ["kube-system"]},
        "podSelectors": [{"name": "web", "selector": {"matchLabels": {"app": "web"}}}],
    }
    report = run(args, nodes, pods, maxNoOfPodsToEvictTotal=1)
    assert report.evicted_pods == ["default/c"]
    reasons = {s.pod: (s.reason_code, s.detail) for s in report.skipped}
    assert reasons["kube-system/a"][0] is Reason.FILTERED
    assert "evictableNamespaces" in reasons["kube-system/a"][1]
    assert "podSelectors" in reasons["default/b"][1]
    assert reasons["default/d"][0] is Reason.LIMIT_REACHED


def test_plugin_dry_run_and_paused_evict_nothing() -> None:
    """`dryRun` records what it would do; `paused` does nothing at all."""
    nodes = [node("g", "gold"), node("s", "silver")]
    dry = run({"dryRun": True}, nodes, [pod("a", "g")])
    assert dry.evicted_pods == []
    assert "args.dryRun: would evict towards node s" in dry.skipped[0].detail
    paused = run({"paused": True}, nodes, [pod("a", "g")])
    assert paused.evicted_pods == [] and paused.skipped == ()
