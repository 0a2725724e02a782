"""kubernetes-sigs/descheduler RemovePodsViolatingNodeAffinity, case by case from its table.

Source: kubernetes-sigs/descheduler
`pkg/framework/plugins/removepodsviolatingnodeaffinity/node_affinity_test.go`
(TestRemovePodsViolatingNodeAffinity). `addPodsToNode` puts three pods owned
by a Pod on a node: one with the row's node affinity on
`kubernetes.io/desiredNode In [yes]` (required, or preferred with weight 10)
and two without; all terminating when the row says so. Rows run with
DefaultEvictor `nodeFit` as set and the row's caps, and count evictions.
Single-node rows get an empty, unschedulable spare node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from descheduler.config import ConfigError
from kube import objects
from tests.conformance import reference as ref
from tests.conformance.reference import differs, node_labels, pod_owner, same, spec

TITLE = "descheduler RemovePodsViolatingNodeAffinity"
FILE = (
    "kubernetes-sigs/descheduler "
    "pkg/framework/plugins/removepodsviolatingnodeaffinity/node_affinity_test.go"
)
TEST = "TestRemovePodsViolatingNodeAffinity"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
INVALID = "requiredDuringSchedulingRequiredDuringExecution"
DESIRED = {"key": "kubernetes.io/desiredNode", "operator": "In", "values": ["yes"]}
CONFIG_ERROR = "the configuration is refused"


def node(name: str, *setters: Any) -> objects.Node:
    return ref.node(name, 2000, 3000, 10, *setters)


WITH_LABELS = node("nodeWithLabels", node_labels(**{"kubernetes.io/desiredNode": "yes"}))
WITHOUT_LABELS = node("nodeWithoutLabels")
UNSCHEDULABLE_WITH_LABELS = node(
    "unschedulableNodeWithLabels",
    node_labels(**{"kubernetes.io/desiredNode": "yes"}),
    ref.unschedulable,
)


def affinity(kind: str) -> Any:
    if kind == REQUIRED:
        node_affinity: dict[str, Any] = {
            kind: {"nodeSelectorTerms": [{"matchExpressions": [DESIRED]}]}
        }
    elif kind == PREFERRED:
        node_affinity = {kind: [{"weight": 10, "preference": {"matchExpressions": [DESIRED]}}]}
    else:
        node_affinity = {}
    return spec(affinity={"nodeAffinity": node_affinity})


def pods_on(node_name: str, kind: str, *, terminating: bool = False) -> list[objects.Pod]:
    extra = (ref.terminating,) if terminating else ()
    return [
        ref.pod("podWithNodeAffinity", 100, 0, node_name, pod_owner, affinity(kind), *extra),
        ref.pod("pod1", 100, 0, node_name, pod_owner, *extra),
        ref.pod("pod2", 100, 0, node_name, pod_owner, *extra),
    ]


BOTH = [WITHOUT_LABELS, WITH_LABELS]


def case(
    name: str,
    kind: str,
    pods: Sequence[objects.Pod],
    nodes: Sequence[objects.Node],
    expect: ref.Expect,
    **settings: Any,
) -> Any:
    return pytest.param(kind, nodes, pods, settings, expect, id=f"{TEST}/{name}")


def both_kinds(
    name: str,
    expected: int,
    *,
    terminating: bool = False,
    nodes: Sequence[objects.Node] = BOTH,
    **settings: Any,
) -> list[Any]:
    """The table's [required affinity] and [preferred affinity] rows of one description."""
    return [
        case(
            f"{name} [{label} affinity]",
            kind,
            pods_on("nodeWithoutLabels", kind, terminating=terminating),
            nodes,
            same(expected),
            **settings,
        )
        for label, kind in (("required", REQUIRED), ("preferred", PREFERRED))
    ]


SCHEDULABLE = "Pod is scheduled on node without matching labels, another schedulable node available"
CASES = [
    case(
        "Invalid Affinity type, should not evict any pods",
        INVALID,
        pods_on("nodeWithoutLabels", INVALID),
        BOTH,
        # Upstream's validation accepts any string here and the plugin then ignores it;
        # nodeqos refuses the configuration, naming the field and the known values.
        differs(0, CONFIG_ERROR, "unknown-values-refused"),
    ),
    case(
        "Pod is correctly scheduled on node, no eviction expected [required affinity]",
        REQUIRED,
        pods_on("nodeWithLabels", REQUIRED),
        [WITH_LABELS],
        same(0),
    ),
    case(
        "Pod is correctly scheduled on node, no eviction expected [preferred affinity]",
        PREFERRED,
        pods_on("nodeWithLabels", PREFERRED),
        [WITH_LABELS],
        same(0),
    ),
    case(
        f"{SCHEDULABLE}, should be evicted",
        REQUIRED,
        pods_on("nodeWithoutLabels", REQUIRED),
        BOTH,
        same(1),
    ),
    case(
        "Pod is scheduled on node without matching labels, another schedulable node available with better fit, "
        "should be evicted",
        PREFERRED,
        pods_on("nodeWithoutLabels", PREFERRED),
        BOTH,
        same(1),
    ),
    *both_kinds(
        f"{SCHEDULABLE}, maxPodsToEvictPerNode set to 1, should be evicted",
        1,
        maxNoOfPodsToEvictPerNode=1,
    ),
    *both_kinds(
        f"{SCHEDULABLE}, maxPodsToEvictPerNode set to 0, should be not evicted",
        0,
        maxNoOfPodsToEvictPerNode=0,
    ),
    *both_kinds(
        f"{SCHEDULABLE}, maxPodsToEvictPerNode set to 1, no pod evicted since pod terminating",
        0,
        terminating=True,
        maxNoOfPodsToEvictPerNode=1,
    ),
    case(
        f"{SCHEDULABLE}, maxNoOfPodsToEvictPerNamespace set to 1, should be evicted [required affinity]",
        REQUIRED,
        pods_on("nodeWithoutLabels", REQUIRED),
        BOTH,
        same(1),
        maxNoOfPodsToEvictPerNamespace=1,
    ),
    case(
        f"{SCHEDULABLE}, maxNoOfPodsToEvictTotal set to 0, should not be evicted [required affinity]",
        REQUIRED,
        pods_on("nodeWithoutLabels", REQUIRED),
        BOTH,
        same(0),
        maxNoOfPodsToEvictPerNamespace=1,
        maxNoOfPodsToEvictTotal=0,
    ),
    case(
        f"{SCHEDULABLE}, maxNoOfPodsToEvictPerNamespace set to 1, should be evicted [preferred affinity]",
        PREFERRED,
        pods_on("nodeWithoutLabels", PREFERRED),
        BOTH,
        same(1),
        maxNoOfPodsToEvictPerNamespace=1,
    ),
    *both_kinds(
        f"{SCHEDULABLE}, maxNoOfPodsToEvictPerNamespace set to 0, should not be evicted",
        0,
        maxNoOfPodsToEvictPerNamespace=0,
    ),
    *both_kinds(
        f"{SCHEDULABLE}, maxNoOfPodsToEvictPerNamespace set to 1, no pod evicted since pod terminting",
        0,
        terminating=True,
        maxNoOfPodsToEvictPerNamespace=1,
    ),
    *both_kinds(
        "Pod is scheduled on node without matching labels, but no node where pod fits is available, should not "
        "evict",
        0,
        nodes=[WITHOUT_LABELS, UNSCHEDULABLE_WITH_LABELS],
        nodeFit=True,
    ),
    *both_kinds(
        "Pod is scheduled on node without matching labels, and unschedulable node where pod could fit is "
        "available, should not evict",
        0,
        nodes=[WITH_LABELS, UNSCHEDULABLE_WITH_LABELS],
        maxNoOfPodsToEvictPerNode=1,
        nodeFit=True,
    ),
]


@pytest.mark.parametrize(("kind", "nodes", "pods", "settings", "expect"), CASES)
def test_case(
    kind: str,
    nodes: Sequence[objects.Node],
    pods: Sequence[objects.Pod],
    settings: Mapping[str, Any],
    expect: ref.Expect,
) -> None:
    """The row's number of evictions."""
    args = {"nodeAffinityType": [kind]}
    plugin = "RemovePodsViolatingNodeAffinity"
    if expect.wanted == CONFIG_ERROR:
        with pytest.raises(ConfigError, match="nodeAffinityType"):
            ref.evictions("deschedule", plugin, args, nodes, pods, settings, spare=True)
        return
    ref.check(ref.evictions("deschedule", plugin, args, nodes, pods, settings, spare=True), expect)


ALL = (CASES,)
