"""Koordinator LowNodeLoad's helper tables, case by case: reason, pools, detector, capacity.

Source: koordinator-sh/koordinator
`pkg/descheduler/framework/plugins/loadaware/low_node_load_test.go`
(TestOverUtilizedEvictionReason, Test_filterNodes, Test_filterRealAbnormalNodes,
Test_resetNodesAsNormal, Test_tryMarkNodesAsNormal,
Test_GetNodeRawAllocatableForDescheduler), each against the nodeqos piece that
does the same job. The plugin's cycle tables are in `test_koordinator_lownodeload`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from kube import objects
from tests.conformance import reference as ref
from tests.conformance.reference import differs, node, node_labels, pod, same

TITLE = "Koordinator LowNodeLoad"
FILE = "koordinator pkg/descheduler/framework/plugins/loadaware/low_node_load_test.go"


# -- TestOverUtilizedEvictionReason: what the eviction reason names ----------------------------

RAW_96 = {"node.koordinator.sh/raw-allocatable": '{"cpu":96,"memory":"512Gi"}'}
GI = 2**30

REASONS = [
    pytest.param(
        {"cpu": 64_000, "memory": 32 * GI},
        None,
        same([("cpu", "66.67", "50.00")]),
        id="TestOverUtilizedEvictionReason/cpu overutilized",
    ),
    pytest.param(
        {"cpu": 64_000, "memory": 400 * GI},
        None,
        same([("cpu", "66.67", "50.00"), ("memory", "78.12", "50.00")]),
        id="TestOverUtilizedEvictionReason/both cpu and memory overutilized",
    ),
    pytest.param(
        {"cpu": 46_000, "memory": 250 * GI},
        {"cpu": 45_000, "memory": 200 * GI},
        same([("prod cpu", "46.88", "40.00")]),
        id="TestOverUtilizedEvictionReason/prod cpu overutilized",
    ),
    pytest.param(
        {"cpu": 46_000, "memory": 250 * GI},
        {"cpu": 45_000, "memory": 250 * GI},
        same([("prod cpu", "46.88", "40.00"), ("prod memory", "48.83", "40.00")]),
        id="TestOverUtilizedEvictionReason/prod cpu && memory overutilized",
    ),
]


@pytest.mark.parametrize(("usage", "prod_usage", "expect"), REASONS)
def test_eviction_reason(
    usage: Mapping[str, int], prod_usage: Mapping[str, int] | None, expect: ref.Expect
) -> None:
    """The reason names each resource over its mark with usage% and threshold% (2 decimals).

    The wording is ours ("cpu usage 66.67% > high mark 50.00%" where the
    reference writes "node cpu usage(66.67%)>threshold(50.00%)"); the facts,
    which resources and which percentages, are compared.
    """
    from descheduler.plugins import lownodeload
    from descheduler.plugins.lownodeload import classify
    from descheduler.plugins.lownodeload import usage as load_usage
    from tests import builders

    n = builders.make_node_dict("test-node", cpu="96", memory="512Gi")
    n["metadata"]["annotations"] = dict(RAW_96)
    the_node = objects.Node.from_api(n)
    prod = prod_usage is not None
    pods = [pod("prod", 1, 1, "test-node")] if prod else []  # Burstable: LS, so prod
    entries = {"prod": dict(prod_usage)} if prod_usage is not None else {}
    metric = builders.make_nodemetric(
        "test-node",
        node_cpu=usage["cpu"],
        node_memory=usage["memory"],
        pods=entries,
        update_time=ref.NOW,
    )
    load = load_usage.node_load(the_node, metric, pods, now=ref.NOW, expiration=ref.EXPIRY)
    assert isinstance(load, load_usage.NodeLoad)
    high = {"cpu": 50, "memory": 50}
    raw: dict[str, Any] = {"lowThresholds": {"cpu": 10, "memory": 10}, "highThresholds": high}
    if prod:
        raw |= {"prodLowThresholds": {"cpu": 10, "memory": 10}}
        raw |= {"prodHighThresholds": {"cpu": 40, "memory": 40}}
    [pool] = lownodeload.Args.from_mapping(raw).pools
    marks = classify.pool_marks(pool, [load])[the_node.name]
    track = classify.Track.PROD if prod else classify.Track.NODE
    used = load.prod_usage if prod else load.usage
    detail = classify.describe_over(load, used, marks, track)
    named = [
        (
            part.split(" usage ")[0],
            part.split(" usage ")[1].split("%")[0],
            part.split("mark ")[1][:-1],
        )
        for part in detail.split("; ")
    ]
    assert named == expect.wanted


# -- Test_filterNodes: which nodes a node pool's selector takes --------------------------------

FILTER_NODES = [
    pytest.param(
        None, {}, same(["test-node-1", "test-node-2"]), id="Test_filterNodes/empty selector"
    ),
    pytest.param(
        {"matchLabels": {"test": "true"}},
        {"test-node-2": {"test": "true"}},
        same(["test-node-2"]),
        id="Test_filterNodes/matched selector",
    ),
    pytest.param(
        {"matchLabels": {"test": "true"}}, {}, same([]), id="Test_filterNodes/unmatched selector"
    ),
    pytest.param(
        {"matchExpressions": [{"key": "test", "operator": "non-exist-operator"}]},
        {},
        same("error"),
        id="Test_filterNodes/invalid selector",
    ),
]


@pytest.mark.parametrize(("selector", "node_labels_by_name", "expect"), FILTER_NODES)
def test_node_pool_selector(
    selector: Mapping[str, Any] | None,
    node_labels_by_name: Mapping[str, Mapping[str, str]],
    expect: ref.Expect,
) -> None:
    """A pool takes the nodes its selector matches; a bad selector is a config error."""
    from descheduler.config import ConfigError
    from descheduler.plugins import lownodeload
    from descheduler.plugins.lownodeload import classify

    nodes = [
        node(
            "test-node-1", 4000, 3000, 9, node_labels(**node_labels_by_name.get("test-node-1", {}))
        ),
        node(
            "test-node-2", 4000, 3000, 10, node_labels(**node_labels_by_name.get("test-node-2", {}))
        ),
    ]
    pool: dict[str, Any] = {"lowThresholds": {"cpu": 10}, "highThresholds": {"cpu": 50}}
    if selector is not None:
        pool["nodeSelector"] = selector
    try:
        args = lownodeload.Args.from_mapping({"nodePools": [pool]})
    except ConfigError as err:
        assert expect.wanted == "error"
        assert "nodePools[0].nodeSelector" in str(err)
        return
    [members], _ = classify.assign_pools(nodes, args.pools)
    assert [n.name for n in members] == expect.wanted


# -- the anomaly detector: Test_filterRealAbnormalNodes, Test_resetNodesAsNormal, ...----------


def _detector_run(steps: Sequence[tuple[str, Sequence[str]]], n: int, m: int) -> list[list[str]]:
    """Feed readings to a fresh detector: ("hot", nodes) marks hot readings, ("normal", nodes)
    cool ones, ("reset", nodes) forgets; each step answers the nodes acted on."""
    from datetime import timedelta

    from descheduler.plugins.lownodeload import anomaly
    from descheduler.plugins.lownodeload.args import AnomalyCondition

    detector = anomaly.AnomalyDetector(forget_after=timedelta(minutes=5))
    condition = AnomalyCondition(consecutive_abnormalities=n, consecutive_normalities=m)
    answers = []
    for kind, names in steps:
        acted = []
        for name in names:
            node_name = objects.NodeName(name)
            if kind == "reset":
                detector.reset(node_name)
            elif kind == "state":
                acted.append(f"{name}:{detector.status(node_name).state.value}")
            elif detector.observe(node_name, hot=kind == "hot", now=ref.NOW, condition=condition):
                acted.append(name)
        answers.append(acted)
    return answers


BOTH = ("test-node-1", "test-node-2")
ANOMALY = [
    pytest.param(
        [("hot", BOTH)],
        1,
        1,
        same(list(BOTH)),
        id="Test_filterRealAbnormalNodes/ConsecutiveAbnormalities 1 times and detected abnormality",
    ),
    pytest.param(
        [("hot", BOTH)],
        2,
        1,
        same([]),
        id="Test_filterRealAbnormalNodes/ConsecutiveAbnormalities 2 times and did not detect "
        "abnormality",
    ),
    pytest.param(
        [("hot", BOTH), ("hot", BOTH), ("hot", BOTH)],
        2,
        1,
        same(list(BOTH)),
        id="Test_filterRealAbnormalNodes/ConsecutiveAbnormalities 2 times and detect 2 times",
    ),
    pytest.param(
        [("hot", ("test-node-2",)), ("hot", ("test-node-2",)), ("hot", BOTH)],
        2,
        1,
        same(["test-node-2"]),
        id="Test_filterRealAbnormalNodes/mix abnormal nodes and normal nodes",
    ),
    pytest.param(
        [("hot", ("n",)), ("hot", ("n",)), ("hot", ("n",)), ("reset", ("n",)), ("hot", ("n",))],
        2,
        1,
        same([]),
        id="Test_resetNodesAsNormal",
    ),
    pytest.param(
        [("hot", ("n",))] * 3
        + [("normal", ("n",)), ("normal", ("n",)), ("state", ("n",))]
        + [("normal", ("n",)), ("state", ("n",))],
        2,
        2,
        differs(["n:abnormal", "n:normal"], ["n:normal", "n:normal"], "anomaly-counts"),
        id="Test_tryMarkNodesAsNormal",
    ),
]


@pytest.mark.parametrize(("steps", "n", "m", "expect"), ANOMALY)
def test_anomaly_detector(
    steps: Sequence[tuple[str, Sequence[str]]], n: int, m: int, expect: ref.Expect
) -> None:
    """Which nodes the detector lets act at the last reading (or its states where asked)."""
    answers = _detector_run(steps, n, m)
    states = [
        a for (kind, _), found in zip(steps, answers, strict=True) if kind == "state" for a in found
    ]
    assert (states or answers[-1]) == expect.wanted


# -- Test_GetNodeRawAllocatableForDescheduler: the capacity usage is measured against ----------

RAW = [
    pytest.param(
        None,
        ("16", "32Gi"),
        same(("16", "32Gi")),
        id="Test_GetNodeRawAllocatableForDescheduler/node has no annotation - use allocatable",
    ),
    pytest.param(
        '{"cpu":"8","memory":"16Gi"}',
        ("32", "64Gi"),
        same(("8", "16Gi")),
        id="Test_GetNodeRawAllocatableForDescheduler/node has valid raw allocatable annotation - "
        "use raw allocatable",
    ),
    pytest.param(
        "invalid",
        ("16", "32Gi"),
        same(("16", "32Gi")),
        id="Test_GetNodeRawAllocatableForDescheduler/node has invalid raw allocatable annotation "
        "- fallback to allocatable",
    ),
]


@pytest.mark.parametrize(("annotation", "allocatable", "expect"), RAW)
def test_capacity(annotation: str | None, allocatable: tuple[str, str], expect: ref.Expect) -> None:
    """Load is measured against raw-allocatable when it parses, else allocatable."""
    from descheduler.plugins.lownodeload import usage as load_usage
    from kube import quantity
    from tests import builders

    raw = builders.make_node_dict("test-node", cpu=allocatable[0], memory=allocatable[1])
    if annotation is not None:
        raw["metadata"]["annotations"] = {"node.koordinator.sh/raw-allocatable": annotation}
    capacity = load_usage.capacity_of(objects.Node.from_api(raw))
    cpu, memory = expect.wanted
    assert (capacity["cpu"], capacity["memory"]) == (
        quantity.cpu_millis(cpu),
        quantity.memory_bytes(memory),
    )


ALL = (REASONS, FILTER_NODES, ANOMALY, RAW)
