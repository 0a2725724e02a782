"""Koordinator FragmentationAware (main after v1.8), its unit-test tables replayed.

Source: koordinator-sh/koordinator
`pkg/descheduler/framework/plugins/fragmentationaware/fragmentation_aware_test.go`
(TestFragmentationAware) and `scoring_test.go` (TestScoreNodeImbalance) at
commit a7a1b76bbf81abd26f9c377de1f31a60dd965f6e (2026-07-24; not in a release).
The table builds its args as Go struct literals, so a field it leaves out is
Go's zero value, not the API default: here such rows say `nodeFit: false` and
`minImprovementThreshold: 0` explicitly. Upstream's fake evictor lets every
pod through (a DefaultEvictor without nodeFit here; bare test pods get a
ReplicaSet owner); its "PreEvictionFilter false" row is a DefaultEvictor with
nodeFit on and nowhere to go. Single-node rows get the unschedulable spare
(`reference.with_spare`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from descheduler.plugins.fragmentationaware import scoring
from kube import objects
from tests import builders
from tests.conformance import reference as ref
from tests.conformance.reference import namespace, node_labels, rs_owner, same
from tests.descheduler import fakes

TITLE = "Koordinator FragmentationAware"
FILE = (
    "koordinator pkg/descheduler/framework/plugins/fragmentationaware/fragmentation_aware_test.go"
)
COMMIT = "a7a1b76bbf81abd26f9c377de1f31a60dd965f6e"

NODE1 = ref.node("node1", 4000, 4000, 10, node_labels(pool="test"))
NODE2 = ref.node("node2", 4000, 4000, 10)
ZERO = {"nodeFit": False, "minImprovementThreshold": 0}  # the struct literal's zero values
THROUGH = {"evictLocalStoragePods": True, "nodeFit": False}
REFUSES = {"evictLocalStoragePods": True, "nodeFit": True}


def pod(name: str, cpu: int, memory: int, node: str, *setters: ref.PodSetter) -> objects.Pod:
    return ref.pod(name, cpu, memory, node, rs_owner, *setters)


def args(**given: Any) -> dict[str, Any]:
    return {**ZERO, "resources": ["cpu", "memory"], **given}


CASES = [
    pytest.param(
        args(paused=True, imbalanceThreshold=0.1),
        [NODE1],
        [pod("pod1", 3000, 1000, "node1")],
        THROUGH,
        same([]),
        id="TestFragmentationAware/paused plugin does nothing",
    ),
    pytest.param(
        args(nodeSelector={"matchLabels": {"pool": "test"}}, imbalanceThreshold=0.1),
        [NODE1, NODE2],
        [pod("pod1", 3000, 1000, "node1"), pod("pod2", 3000, 1000, "node2")],
        THROUGH,
        same(["pod1"]),
        id="TestFragmentationAware/nodeSelector filters nodes",
    ),
    pytest.param(
        args(
            imbalanceThreshold=0.1,
            minImprovementThreshold=0.01,
            podSelectors=[{"selector": {"matchLabels": {"foo": "bar"}}}, {}],
        ),
        [NODE1],
        [pod("pod1", 2000, 500, "node1", ref.labels(foo="bar")), pod("pod2", 1000, 500, "node1")],
        THROUGH,
        same(["pod1"]),
        id="TestFragmentationAware/PodSelectors filter pods",
    ),
    pytest.param(
        args(imbalanceThreshold=0.5),
        [NODE1],
        [pod("pod1", 2000, 2000, "node1")],
        THROUGH,
        same([]),
        id="TestFragmentationAware/node below imbalanceThreshold evicts nothing",
    ),
    pytest.param(
        args(imbalanceThreshold=0.1, minImprovementThreshold=0.01),
        [NODE1],
        [pod("pod1", 2500, 500, "node1"), pod("pod2", 500, 500, "node1")],
        THROUGH,
        same(["pod1"]),
        id="TestFragmentationAware/node above threshold chooses best-gain pod",
    ),
    pytest.param(
        args(
            imbalanceThreshold=0.1,
            minImprovementThreshold=0.01,
            evictableNamespaces={"exclude": ["kube-system"]},
        ),
        [NODE1],
        [
            pod("pod1", 2500, 500, "node1", namespace("kube-system")),
            pod("pod2", 2000, 200, "node1"),
        ],
        THROUGH,
        same(["pod2"]),
        id="TestFragmentationAware/non-evictable pods are not candidates",
    ),
    pytest.param(
        args(
            imbalanceThreshold=0.1,
            minImprovementThreshold=0.01,
            evictableNamespaces={"exclude": ["kube-system"]},
        ),
        [NODE1],
        [
            pod("pod1", 2000, 100, "node1", namespace("kube-system")),
            pod("pod2", 1000, 100, "node1"),
        ],
        THROUGH,
        same(["pod2"]),
        id="TestFragmentationAware/non-evictable pods still count in stdBefore",
    ),
    pytest.param(
        args(imbalanceThreshold=0.1, minImprovementThreshold=0.5),
        [NODE1],
        [pod("pod1", 2500, 500, "node1")],
        THROUGH,
        same([]),
        id="TestFragmentationAware/minImprovementThreshold blocks weak candidate",
    ),
    pytest.param(
        args(nodeFit=True, imbalanceThreshold=0.1, minImprovementThreshold=0.01),
        [NODE1, NODE2],
        [pod("pod1", 5000, 500, "node1")],
        THROUGH,
        same([]),
        id="TestFragmentationAware/NodeFit skips pods that cannot fit elsewhere",
    ),
    pytest.param(
        args(imbalanceThreshold=0.1, minImprovementThreshold=0.01),
        [NODE1],
        [pod("pod1", 2500, 500, "node1")],
        REFUSES,
        same([]),
        id="TestFragmentationAware/PreEvictionFilter false prevents eviction",
    ),
    pytest.param(
        args(imbalanceThreshold=0.1, minImprovementThreshold=0.01),
        [NODE1],
        [pod("pod1", 2500, 500, "node1")],
        THROUGH,
        same(["pod1"]),
        id="TestFragmentationAware/evictBestCandidate passes useful reason",
    ),
    pytest.param(
        args(dryRun=True, imbalanceThreshold=0.1, minImprovementThreshold=0.01),
        [NODE1],
        [pod("pod1", 2500, 500, "node1")],
        THROUGH,
        same([]),
        id="TestFragmentationAware/DryRun prevents actual eviction",
    ),
]


@pytest.mark.parametrize(("plugin_args", "nodes", "pods", "evictor", "expect"), CASES)
def test_fragmentation_aware(
    plugin_args: Mapping[str, Any],
    nodes: Sequence[objects.Node],
    pods: Sequence[objects.Pod],
    evictor: Mapping[str, Any],
    expect: ref.Expect,
) -> None:
    """The pods one cycle evicts; an eviction's reason names the scores."""
    report = fakes.run_plugin(
        "FragmentationAware",
        plugin_args,
        pods,
        point="balance",
        nodes=ref.with_spare(nodes),
        evictor=evictor,
        **ref.NO_CAPS,
    )
    assert not report.failures
    assert ref.evicted_names(report) == expect.wanted
    for eviction in report.evictions:
        assert eviction.reason.startswith("fragmentation reduction: stdBefore=")


def gi_node(cpu: int, memory: int, **extra: str) -> objects.Node:
    return builders.make_node("n", cpu=f"{cpu}m", memory=str(memory), extra_allocatable=extra)


SCORES = [
    pytest.param((1000, 1024), [(500, 512)], ["cpu", "memory"], same("< 0.01"), id="balanced"),
    pytest.param((1000, 1024), [(900, 100)], ["cpu", "memory"], same("> 0.1"), id="CPU-heavy"),
    pytest.param((1000, 0), [(500, 512)], ["cpu", "memory"], same("== 0"), id="zero allocatable"),
    pytest.param((1000, 1024), [], [], same("== 0"), id="no scored resources"),
]


@pytest.mark.parametrize(("node_size", "pod_sizes", "resources", "expect"), SCORES)
def test_score_node_imbalance(
    node_size: tuple[int, int],
    pod_sizes: list[tuple[int, int]],
    resources: list[str],
    expect: ref.Expect,
) -> None:
    """TestScoreNodeImbalance: the standard deviation of requested fractions."""
    node = gi_node(*node_size)
    pods = [
        builders.make_pod(f"p{i}", cpu=f"{c}m", memory=str(m)) for i, (c, m) in enumerate(pod_sizes)
    ]
    score = scoring.imbalance(node, pods, resources)
    op, bound = expect.wanted.split()
    assert {"<": score < float(bound), ">": score > float(bound), "==": score == float(bound)}[op]


def test_custom_resource_scores() -> None:
    """TestScoreNodeImbalance/custom resource works if configured: gpu 1/2, cpu 0 -> 0.25."""
    node = gi_node(1000, 1024, **{"example.com/gpu": "2"})
    raw = builders.make_pod_dict("p1", cpu=None, memory=None)
    raw["spec"]["containers"][0]["resources"] = {"requests": {"example.com/gpu": "1"}}
    assert scoring.imbalance(node, [objects.Pod.from_api(raw)], ["example.com/gpu", "cpu"]) == 0.25


ALL = (CASES, SCORES)
