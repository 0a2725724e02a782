"""FragmentationAware: one pod per lopsided node per cycle, the best gain, nodeFit, dryRun."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from descheduler import framework
from descheduler.framework import Reason
from descheduler.plugins.fragmentationaware import scoring
from kube import objects
from tests import builders
from tests.descheduler import fakes

GI = 1 << 30


def node(name: str, cpu: int = 4000, **overrides: Any) -> objects.Node:
    return builders.make_node(name, cpu=f"{cpu}m", memory=str(4 * GI), **overrides)


def pod(name: str, node: str, cpu: int, memory_gi: float) -> objects.Pod:
    return builders.make_pod(name, node=node, cpu=f"{cpu}m", memory=str(int(memory_gi * GI)))


def run(
    args: dict[str, Any], nodes: Sequence[objects.Node], pods: Sequence[objects.Pod]
) -> framework.CycleReport:
    caps = {"maxNoOfPodsToEvictPerNode": 100, "maxNoOfPodsToEvictTotal": 100}
    return fakes.run_plugin(
        "FragmentationAware",
        args,
        pods,
        point="balance",
        nodes=nodes,
        evictor={"nodeFit": False},
        **caps,
    )


def test_one_eviction_per_lopsided_node_per_cycle() -> None:
    """Two cpu-heavy nodes each give up their most lopsided pod, and only that one."""
    nodes = [node("a"), node("b"), node("spare")]
    pods = [
        pod("a1", "a", 2500, 0.25),
        pod("a2", "a", 500, 0.5),
        pod("b1", "b", 3000, 0.5),
        pod("b2", "b", 200, 0.5),
    ]
    assert run({}, nodes, pods).evicted_pods == ["default/a1", "default/b1"]


def test_gain_is_the_drop_in_standard_deviation() -> None:
    """The score: cpu 0.75, memory 0.25 -> 0.25; without the 2500m pod both are 0.125 -> 0."""
    n = node("a")
    heavy, light = pod("a1", "a", 2500, 0.5), pod("a2", "a", 500, 0.5)
    assert scoring.imbalance(n, [heavy, light], ("cpu", "memory")) == 0.25
    assert scoring.imbalance(n, [light], ("cpu", "memory")) == 0.0


def test_node_fit_passes_over_pods_that_fit_nowhere_else() -> None:
    """With nodeFit, a pod that fits nowhere else is passed over with no_fit."""
    nodes = [node("a", cpu=8000), node("small", cpu=1000)]
    report = run({}, nodes, [pod("big", "a", 6000, 0.5)])
    assert report.evicted_pods == []
    assert [(s.pod, s.reason_code) for s in report.skipped] == [("default/big", Reason.NO_FIT)]


def test_plugin_dry_run_records_the_choice() -> None:
    """The plugin's own dryRun names the pod it would evict and evicts nothing."""
    nodes = [node("a"), node("spare")]
    report = run({"dryRun": True}, nodes, [pod("a1", "a", 2500, 0.25)])
    assert report.evicted_pods == []
    assert report.skipped[0].detail.startswith("FragmentationAware: args.dryRun: would evict")
