"""LowNodeLoad classification: static and deviation marks, prod marks, node pools."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest

from descheduler.plugins import lownodeload
from descheduler.plugins.lownodeload import classify, usage
from descheduler.plugins.lownodeload.args import NodePool
from descheduler.plugins.lownodeload.classify import Track, Verdict
from kube import objects
from kube.classify import KoordQOS
from tests.builders import T0, make_node, make_nodemetric, make_pod


def _load(
    name: str, cpu: int, *, prod_cpu: int = 0, node: objects.Node | None = None
) -> usage.NodeLoad:
    """A node whose pods use `cpu` millicores, `prod_cpu` of it by a prod pod."""
    pods = {"prod": prod_cpu, "batch": cpu - prod_cpu}
    pod_objects = [
        make_pod("prod", node=name),
        make_pod("batch", node=name, qos=KoordQOS.BE),
    ]
    metric = make_nodemetric(name, pods=pods)
    load = usage.node_load(
        node or make_node(name), metric, pod_objects, now=T0, expiration=timedelta(minutes=3)
    )
    assert isinstance(load, usage.NodeLoad)
    return load


def _pool(**raw: Any) -> NodePool:
    (pool,) = lownodeload.Args.from_mapping(raw).pools
    return pool


def _verdict(pool: NodePool, load: usage.NodeLoad) -> Verdict:
    marks = classify.pool_marks(pool, [load])[load.name]
    return classify.classify(load, marks, prod_enabled=bool(pool.prod_high_thresholds))


STATIC = {"lowThresholds": {"cpu": 30}, "highThresholds": {"cpu": 70}}


@pytest.mark.parametrize(
    ("cpu", "node_overrides", "hot", "low"),
    [
        pytest.param(1200, {}, False, True, id="at-low-mark-is-low"),
        pytest.param(1201, {}, False, False, id="just-above-low"),
        pytest.param(2800, {}, False, False, id="at-high-mark-is-not-hot"),
        pytest.param(2801, {}, True, False, id="just-above-high"),
        pytest.param(400, {"unschedulable": True}, False, False, id="unschedulable-not-low"),
        pytest.param(400, {"ready": False}, False, False, id="not-ready-not-low"),
        pytest.param(3700, {"unschedulable": True}, True, False, id="unschedulable-can-be-hot"),
    ],
)
def test_static_marks(cpu: int, node_overrides: Mapping[str, Any], hot: bool, low: bool) -> None:
    """Hot is strictly above high on any resource; low is at or under low on all, if schedulable."""
    load = _load("n1", cpu, node=make_node("n1", **node_overrides))
    verdict = _verdict(_pool(**STATIC), load)
    assert (verdict.hot, verdict.low) == (hot, low)


def test_hot_on_any_resource_low_on_every_resource() -> None:
    """Memory above its high mark makes the node hot even when CPU is cool."""
    pool = _pool(
        lowThresholds={"cpu": 30, "memory": 5}, highThresholds={"cpu": 70, "memory": 8}
    )  # memory usage is 10% on every node
    verdict = _verdict(pool, _load("n1", 400))
    assert (verdict.hot, verdict.low) == (True, False)


def test_marks_are_truncated_amounts() -> None:
    """Marks are floor(percent * capacity / 100) like Koordinator's resourceThreshold."""
    pool = _pool(lowThresholds={"cpu": 33.3}, highThresholds={"cpu": 66.66})
    marks = classify.pool_marks(pool, [_load("n1", 100)])[objects.NodeName("n1")]
    assert (marks.low["cpu"], marks.high["cpu"]) == (1331, 2666)


def test_unjudged_resources() -> None:
    """Only threshold resources are judged; one the node lacks is not judged there."""
    pool = _pool(
        lowThresholds={"cpu": 30, "nvidia.com/gpu": 10},
        highThresholds={"cpu": 70, "nvidia.com/gpu": 50},
    )
    marks = classify.pool_marks(pool, [_load("n1", 100)])[objects.NodeName("n1")]
    assert set(marks.high) == {"cpu"}


def test_deviation_marks_follow_the_mean() -> None:
    """low = mean - low deviation, high = mean + high deviation (mean of the pool's usage%)."""
    pool = _pool(useDeviationThresholds=True, lowThresholds={"cpu": 20}, highThresholds={"cpu": 20})
    loads = [_load("a", 400), _load("b", 2000), _load("c", 3600)]  # 10%, 50%, 90%: mean 50%
    marks = classify.pool_marks(pool, loads)
    assert {name: (m.low["cpu"], m.high["cpu"]) for name, m in marks.items()} == {
        "a": (1200, 2800),
        "b": (1200, 2800),
        "c": (1200, 2800),
    }
    verdicts = {load.name: _classify(load, marks) for load in loads}
    assert [(v.hot, v.low) for v in verdicts.values()] == [
        (False, True),
        (False, False),
        (True, False),
    ]


def _classify(load: usage.NodeLoad, marks: Mapping[objects.NodeName, classify.Marks]) -> Verdict:
    return classify.classify(load, marks[load.name], prod_enabled=False)


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        pytest.param(60, 60, (0, 4000), id="clamped-to-0-and-100"),
        pytest.param(0, 10, (4000, 4000), id="zero-low-deviation-means-capacity"),
    ],
)
def test_deviation_clamps(low: float, high: float, expected: tuple[int, int]) -> None:
    """Deviation marks are clamped to [0, 100]%; a 0 low deviation puts both marks at capacity."""
    pool = _pool(
        useDeviationThresholds=True, lowThresholds={"cpu": low}, highThresholds={"cpu": high}
    )
    loads = [_load("a", 400), _load("b", 3600)]  # mean 50%
    marks = classify.pool_marks(pool, loads)[objects.NodeName("a")]
    assert (marks.low["cpu"], marks.high["cpu"]) == expected


PROD = {
    "lowThresholds": {"cpu": 30},
    "highThresholds": {"cpu": 90},
    "prodLowThresholds": {"cpu": 20},
    "prodHighThresholds": {"cpu": 50},
}


@pytest.mark.parametrize(
    ("cpu", "prod_cpu", "source", "destination_for"),
    [
        pytest.param(3700, 3000, Track.NODE, set(), id="hot-node-is-a-node-source"),
        pytest.param(3000, 2400, Track.PROD, set(), id="prod-hot-between-marks"),
        pytest.param(1000, 600, None, {Track.NODE, Track.PROD}, id="low-on-both"),
        pytest.param(1000, 1000, None, {Track.NODE}, id="low-prod-between-marks"),
        pytest.param(3000, 400, None, {Track.PROD}, id="between-marks-prod-low"),
        pytest.param(1200, 800, None, {Track.NODE, Track.PROD}, id="at-both-low-marks"),
    ],
)
def test_prod_classification(
    cpu: int, prod_cpu: int, source: Track | None, destination_for: set[Track]
) -> None:
    """Koordinator's classifyNodes: node sources, prod sources and who receives what."""
    verdict = _verdict(_pool(**PROD), _load("n1", cpu, prod_cpu=prod_cpu))
    assert verdict.source_track is source
    assert verdict.destination_for == destination_for


def test_low_node_that_is_prod_hot_is_a_prod_source_only() -> None:
    """A node low on total load but hot on prod load gives prod pods and receives nothing."""
    pool = _pool(
        lowThresholds={"cpu": 60},
        highThresholds={"cpu": 90},
        prodLowThresholds={"cpu": 20},
        prodHighThresholds={"cpu": 40},
    )
    verdict = _verdict(pool, _load("n1", 2000, prod_cpu=2000))
    assert verdict.source_track is Track.PROD
    assert verdict.destination_for == frozenset()


def test_prod_marks_are_opt_in() -> None:
    """Without prodHighThresholds no node is prod hot or prod low."""
    verdict = _verdict(_pool(**STATIC), _load("n1", 2000, prod_cpu=2000))
    assert (verdict.prod_hot, verdict.prod_low) == (False, False)
    assert verdict.destination_for == frozenset()


def test_first_matching_pool_wins() -> None:
    """A node joins the first pool whose selector matches; a pool without selector takes all."""
    args = lownodeload.Args.from_mapping(
        {
            "nodePools": [
                {"name": "gpu", "nodeSelector": {"matchLabels": {"pool": "gpu"}}},
                {"name": "rest"},
            ]
        }
    )
    nodes = [
        make_node("g1", labels={"pool": "gpu"}),
        make_node("c1"),
        make_node("g2", labels={"pool": "gpu"}),
    ]
    members, unpooled = classify.assign_pools(nodes, args.pools)
    assert [[n.name for n in pool] for pool in members] == [["g1", "g2"], ["c1"]]
    assert unpooled == []


def test_nodes_in_no_pool_are_left_out() -> None:
    """With only selective pools, an unselected node belongs to none."""
    args = lownodeload.Args.from_mapping(
        {"nodePools": [{"name": "gpu", "nodeSelector": {"matchLabels": {"pool": "gpu"}}}]}
    )
    members, unpooled = classify.assign_pools([make_node("c1")], args.pools)
    assert members == [[]]
    assert [n.name for n in unpooled] == ["c1"]


def test_by_heat_is_a_total_order() -> None:
    """Sources hottest first by weighted usage%, equal scores by name."""
    loads = [_load("b", 3000), _load("c", 3600), _load("a", 3000)]
    ordered = classify.by_heat(loads, {"cpu": 1, "memory": 1})
    assert [load.name for load in ordered] == ["c", "a", "b"]
    coolest = classify.by_heat(loads, {"cpu": 1}, hottest_first=False)
    assert [load.name for load in coolest] == ["a", "b", "c"]


def test_excess() -> None:
    """Excess is usage above the high mark, for resources strictly above it."""
    assert classify.excess({"cpu": 3700, "memory": 10}, {"cpu": 2800, "memory": 10}) == {"cpu": 900}
