"""Koordinator v1.8 CustomPriority, its unit tests replayed as data.

Source: koordinator-sh/koordinator
`pkg/descheduler/framework/plugins/custompriority/custom_priority_test.go` at v1.8.0
(commit 989ca85c62abcca92b303aa12fd2ccff2ed30fed). Upstream tests call the
plugin's helpers directly with a recording evictor that accepts every pod;
here each row goes through what a user reaches: the args loader (validation),
or one descheduling cycle of a profile running CustomPriority with a
DefaultEvictor that lets every pod through (`evictLocalStoragePods`,
no nodeFit) and no caps. Fixtures follow upstream's
`newNode(name, labels, cpuMilli, memBytes, pods)` and
`newPod(ns, name, node, cpuMilli, memBytes, labels)` (Running; given a
ReplicaSet owner here so DefaultEvictor's bare-pod rule does not refuse them,
as upstream's recording evictor refuses nothing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from descheduler import config, framework
from descheduler.plugins import custompriority
from kube import objects
from tests import builders
from tests.conformance import reference as ref
from tests.conformance.reference import differs, same
from tests.descheduler import fakes

TITLE = "Koordinator CustomPriority"
FILE = "koordinator pkg/descheduler/framework/plugins/custompriority/custom_priority_test.go"
COMMIT = "989ca85c62abcca92b303aa12fd2ccff2ed30fed"  # v1.8.0

# Upstream's recording evictor accepts every pod.
EVICT_ALL = {"evictLocalStoragePods": True, "evictSystemCriticalPods": True, "nodeFit": False}
GI = 1 << 30


def new_node(
    name: str, labels: Mapping[str, str] | None, cpu: int, memory: int, pods: int
) -> objects.Node:
    return builders.make_node(
        name, cpu=f"{cpu}m", memory=str(memory), pods=str(pods), labels=dict(labels or {})
    )


def new_pod(
    ns: str, name: str, node: str, cpu: int, memory: int, labels: Mapping[str, str] | None = None
) -> objects.Pod:
    return builders.make_pod(
        name,
        namespace=ns,
        node=node,
        cpu=f"{cpu}m",
        memory=str(memory),
        labels=dict(labels or {}),
        owner="ReplicaSet",
        priority=0,
    )


def sel(key: str, value: str) -> dict[str, Any]:
    return {"matchLabels": {key: value}}


GOLD_SILVER = [
    {"name": "gold", "nodeSelector": sel("tier", "gold")},
    {"name": "silver", "nodeSelector": sel("tier", "silver")},
]


# -- Test_validateCustomPriorityArgs (+ Test_NewCustomPriority_and_Name): the loader ----------

VALIDATION = [
    pytest.param(
        {},
        same("evictionOrder: needs at least 2 levels"),
        id="Test_validateCustomPriorityArgs/too few priorities",
    ),
    pytest.param(
        {
            "evictionOrder": [
                {"name": "p1", "nodeSelector": sel("a", "1")},
                {"name": "p1", "nodeSelector": sel("b", "2")},
            ]
        },
        same("evictionOrder[1].name: duplicate level name 'p1'"),
        id="Test_validateCustomPriorityArgs/duplicate names",
    ),
    pytest.param(
        {"evictionOrder": [{"name": "p1", "nodeSelector": sel("a", "1")}, {"name": "p2"}]},
        same("evictionOrder[1].nodeSelector: required"),
        id="Test_validateCustomPriorityArgs/missing selector",
    ),
    pytest.param(
        {
            "evictionOrder": [
                {"name": "p1", "nodeSelector": sel("a", "1")},
                {"name": "p2", "nodeSelector": sel("b", "2")},
            ]
        },
        same(None),
        id="Test_validateCustomPriorityArgs/valid",
    ),
    pytest.param(
        {"evictionOrder": [{"name": "p1", "nodeSelector": sel("a", "1")}]},
        same("evictionOrder: needs at least 2 levels"),
        id="Test_NewCustomPriority_and_Name/invalid args",
    ),
    pytest.param(
        {
            "podSelectors": [
                {
                    "name": "bad",
                    "selector": {"matchExpressions": [{"key": "app", "operator": "Invalid"}]},
                }
            ],
            "evictionOrder": GOLD_SILVER,
        },
        same("podSelectors[0].selector.matchExpressions[0].operator"),
        id="Test_filterPods/invalid selector returns error",
    ),
    pytest.param(
        {
            "evictionOrder": [
                *GOLD_SILVER,
                {
                    "name": "bad",
                    "nodeSelector": {"matchExpressions": [{"key": "tier", "operator": "Invalid"}]},
                },
            ]
        },
        # upstream's plugin skips the level whose selector does not parse; its validation lets it by
        differs(
            None,
            "evictionOrder[2].nodeSelector.matchExpressions[0].operator",
            "unknown-values-refused",
        ),
        id="Test_classifyNodesByPriority (level 'bad')",
    ),
]


@pytest.mark.parametrize(("args", "expect"), VALIDATION)
def test_validation(args: Mapping[str, Any], expect: ref.Expect) -> None:
    """The args load, or the error names the field upstream's validation names."""
    if expect.wanted is None:
        custompriority.Args.from_mapping(args)
        return
    with pytest.raises(config.ConfigError) as caught:
        custompriority.Args.from_mapping(args)
    assert expect.wanted in str(caught.value)


# -- cycles: what gets evicted ------------------------------------------------------------------

SILVER_1000 = new_node("t1", {"tier": "silver"}, 1000, GI, 100)

CYCLES = [
    pytest.param(
        {"podSelectors": [{"name": "s1", "selector": sel("app", "a")}]},
        [new_node("s1", {"tier": "gold"}, 1000, GI, 100), SILVER_1000],
        [
            new_pod("default", "yes", "s1", 10, 10, {"app": "a"}),
            new_pod("default", "no", "s1", 10, 10, {"app": "b"}),
            new_pod("default", "none", "s1", 10, 10, {"x": "y"}),
        ],
        same(["default/yes"]),
        id="Test_filterPods/match one selector, no match",
    ),
    pytest.param(
        {"nodeSelector": sel("tier", "bronze")},
        [new_node("s1", {"tier": "gold"}, 1000, GI, 100), SILVER_1000],
        [new_pod("ns", "p", "s1", 10, 10)],
        same([]),
        id="Test_filterNodes/match none (Test_Balance: node selector filtering no nodes)",
    ),
    pytest.param(
        {"nodeSelector": sel("tier", "gold")},
        [new_node("s1", {"tier": "gold"}, 1000, GI, 100), SILVER_1000],
        [new_pod("ns", "p", "s1", 10, 10)],
        same([]),
        id="Test_filterNodes/match gold (one level left: nothing moves)",
    ),
    pytest.param(
        {"nodeFit": True},
        [new_node("s", {"tier": "gold"}, 8000, GI, 100), SILVER_1000],
        [
            new_pod("ns", n, "s", cpu, 100)
            for n, cpu in (
                ("small", 100),
                ("big", 2000),
                ("mid", 400),
                ("big2", 3000),
                ("big3", 3000),
                ("big4", 3000),
            )
        ],
        same(["ns/small", "ns/mid"]),
        id="Test_findEvictablePods/NodeFit true",
    ),
    pytest.param(
        {"nodeFit": False},
        [new_node("s", {"tier": "gold"}, 8000, GI, 100), SILVER_1000],
        [
            new_pod("ns", n, "s", cpu, 100)
            for n, cpu in (
                ("small", 100),
                ("big", 2000),
                ("mid", 400),
                ("big2", 3000),
                ("big3", 3000),
                ("big4", 3000),
            )
        ],
        differs(
            ["ns/small", "ns/mid", "ns/big", "ns/big2", "ns/big3", "ns/big4"],
            ["ns/small", "ns/mid"],
            "always-destination",
        ),
        id="Test_findEvictablePods/NodeFit false",
    ),
    pytest.param(
        {"nodeFit": False},
        [new_node("s1", {"tier": "gold"}, 1000, GI, 100), SILVER_1000],
        [new_pod("ns", "p1", "s1", 10, 10), new_pod("ns", "p2", "s1", 20, 20)],
        same(["ns/p1", "ns/p2"]),
        id="Test_evictFromPriorityToTargets",
    ),
    pytest.param(
        {"nodeFit": False, "dryRun": True},
        [new_node("s1", {"tier": "gold"}, 1000, GI, 100), SILVER_1000],
        [new_pod("ns", "p1", "s1", 10, 10), new_pod("ns", "p2", "s1", 20, 20)],
        same([]),
        id="Test_evictFromPriorityToTargets/dry run path",
    ),
    pytest.param(
        {"mode": "DrainNode", "autoCordon": True},
        [
            new_node("s1", {"tier": "gold"}, 1000, GI, 100),
            new_node("t1", {"tier": "silver"}, 500, GI, 100),
            new_node("t2", {"tier": "bronze"}, 500, GI, 100),
        ],
        [new_pod("ns", "p1", "s1", 100, 100), new_pod("ns", "p2", "s1", 100, 100)],
        same(["ns/p1", "ns/p2"]),
        id="Test_evictByDrainingNodes_and_processEvictions",
    ),
    pytest.param(
        {"paused": True},
        [new_node("s1", {"tier": "gold"}, 1000, GI, 100), SILVER_1000],
        [new_pod("ns", "p", "s1", 10, 10)],
        same([]),
        id="Test_Balance/paused",
    ),
    pytest.param(
        {"mode": "BestEffort"},
        [new_node("s1", {"tier": "gold"}, 1000, GI, 100), SILVER_1000],
        [new_pod("ns", "p", "s1", 10, 10)],
        same(["ns/p"]),
        id="Test_Balance/normal run BestEffort",
    ),
]

THREE_LEVELS = [*GOLD_SILVER, {"name": "bronze", "nodeSelector": sel("tier", "bronze")}]


def run(
    args: Mapping[str, Any], nodes: Sequence[objects.Node], pods: Sequence[objects.Pod]
) -> framework.CycleReport:
    full = {"evictionOrder": THREE_LEVELS, **args}
    return fakes.run_plugin(
        "CustomPriority",
        full,
        pods,
        point="balance",
        nodes=nodes,
        evictor=EVICT_ALL,
        **ref.NO_CAPS,
    )


@pytest.mark.parametrize(("args", "nodes", "pods", "expect"), CYCLES)
def test_cycle(
    args: Mapping[str, Any],
    nodes: Sequence[objects.Node],
    pods: Sequence[objects.Pod],
    expect: ref.Expect,
) -> None:
    """The pods one cycle evicts, in order."""
    report = run(args, nodes, pods)
    assert not report.failures
    assert report.evicted_pods == expect.wanted


def test_sort_pods_by_requests_ascending() -> None:
    """Test_sortPodsByRequestsAscending: cpu, then memory, then namespace/name."""
    from descheduler.plugins.custompriority import plugin

    pods = [
        new_pod("ns", "a", "n", 200, 100),
        new_pod("ns", "b", "n", 100, 500),
        new_pod("ns", "c", "n", 100, 100),
    ]
    assert [p.name for p in sorted(pods, key=plugin.size_key)] == ["c", "b", "a"]


def test_pod_requests_sum_containers() -> None:
    """Test_getPodRequests: two containers' requests add up (250m+250m, 128Mi+256Mi)."""
    raw = builders.make_pod_dict("p", cpu="250m", memory=str(128 << 20))
    second = dict(raw["spec"]["containers"][0], name="c2")
    second["resources"] = {"requests": {"cpu": "250m", "memory": str(256 << 20)}}
    raw["spec"]["containers"].append(second)
    pod = objects.Pod.from_api(raw)
    assert (pod.requests["cpu"], pod.requests["memory"]) == (500, 384 << 20)


ALL = (VALIDATION, CYCLES)
