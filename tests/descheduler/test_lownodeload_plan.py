"""LowNodeLoad cycles end to end (pure): scenarios D1-D3, pools, prod, anomaly, cool-down."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest

from descheduler.plugins import lownodeload
from descheduler.plugins.lownodeload import plan as planner
from descheduler.plugins.lownodeload.anomaly import AnomalyDetector
from descheduler.plugins.lownodeload.classify import Track
from descheduler.plugins.lownodeload.cooldown import CoolDown
from descheduler.plugins.lownodeload.outcome import Decision, Plan, Role
from kube import objects, slo
from kube.classify import KoordQOS
from tests.builders import T0, make_node, make_nodemetric, make_pod

NOW = T0 + timedelta(seconds=30)
D1_ARGS = {
    "lowThresholds": {"cpu": 30},
    "highThresholds": {"cpu": 70},
    "anomalyCondition": {"consecutiveAbnormalities": 1},
}
D1_A = {"a1200": 1200, "a1000": 1000, "a600": 600, "a400": 400, "a300": 300, "a200": 200}


@dataclass
class Cluster:
    """Nodes, their pods and NodeMetrics; pods use the CPU millicores given."""

    spec: Mapping[str, Mapping[str, int]]
    node_kw: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    pod_kw: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    reported_at: Mapping[str, datetime] = field(default_factory=dict)
    attempts: list[Decision] = field(default_factory=list)

    def run(
        self,
        args: Mapping[str, Any],
        *,
        now: datetime = NOW,
        detector: AnomalyDetector | None = None,
        cool_down: CoolDown | None = None,
        evictable: Callable[[objects.Pod], Any] = lambda pod: None,
        refuse: Callable[[Decision], Any] = lambda decision: None,
    ) -> Plan:
        nodes = [make_node(name, **self.node_kw.get(name, {})) for name in self.spec]
        pods = {
            objects.NodeName(node): [
                make_pod(p, node=node, **self.pod_kw.get(p, {})) for p in pod_cpu
            ]
            for node, pod_cpu in self.spec.items()
        }
        metrics: dict[str, slo.NodeMetric] = {
            node: make_nodemetric(
                node,
                pods=dict(pod_cpu),
                update_time=self.reported_at.get(node, now - timedelta(seconds=30)),
            )
            for node, pod_cpu in self.spec.items()
        }

        def try_evict(decision: Decision) -> Any:
            self.attempts.append(decision)
            return refuse(decision)

        return planner.plan(
            nodes,
            pods,
            metrics,
            lownodeload.Args.from_mapping(dict(args)),
            now=now,
            detector=AnomalyDetector() if detector is None else detector,
            cool_down=CoolDown() if cool_down is None else cool_down,
            evictable=evictable,
            try_evict=try_evict,
        )


def _summary(result: Plan) -> list[tuple[str, str | None, str | None]]:
    """(pod, destination, reason) per decision, in order."""
    return [(d.pod.name, d.destination, d.reason) for d in result.decisions]


def _cpu(result: Plan, node: str) -> int:
    return result.ledger.usage(objects.NodeName(node)).cpu


def test_d1_evicts_exactly_the_pod_that_covers_the_excess() -> None:
    """D1: one eviction, the 1000m pod to B; A projected 2700m (67.5%), B 1400m."""
    result = Cluster({"A": D1_A, "B": {"b400": 400}, "C": {"c2000": 2000}}).run(D1_ARGS)
    assert _summary(result) == [("a1000", "B", None)]
    (decision,) = result.evicted
    assert (decision.source, decision.track, decision.pool) == (
        "A",
        Track.NODE,
        "__default_node_pool__",
    )
    assert decision.detail == "cpu usage 92.50% > high mark 70.00%"
    assert (_cpu(result, "A"), _cpu(result, "B"), _cpu(result, "C")) == (2700, 1400, 2000)
    assert _cpu(result, "A") * 100 / 4000 == 67.5
    roles = {name: report.role for name, report in result.nodes.items()}
    assert roles == {"A": Role.SOURCE, "B": Role.DESTINATION, "C": Role.NEITHER}
    assert result.relieved == ("A",)
    assert result.reason is None


def test_d2_no_destination_no_eviction() -> None:
    """D2: B at 1300m (32.5%) is not underutilized: zero evictions, reason no_destination."""
    cluster = Cluster({"A": D1_A, "B": {"b1300": 1300}, "C": {"c2000": 2000}})
    result = cluster.run(D1_ARGS)
    assert result.decisions == ()
    assert cluster.attempts == []
    (pool,) = result.pools
    assert (pool.reason, pool.detail) == ("no_destination", "no underutilized nodes")
    assert result.reason == "no_destination"
    assert result.nodes[objects.NodeName("A")].reason == "no_destination"


def test_d2_tainted_only_destination_every_candidate_no_fit() -> None:
    """D2 variant: B carries a NoSchedule taint A's pods do not tolerate: each candidate no_fit."""
    cluster = Cluster(
        {"A": D1_A, "B": {"b400": 400}, "C": {"c2000": 2000}},
        node_kw={"B": {"taints": ["dedicated=db:NoSchedule"]}},
    )
    result = cluster.run(D1_ARGS)
    assert result.evicted == ()
    assert cluster.attempts == []
    assert sorted(_summary(result)) == sorted((name, None, "no_fit") for name in D1_A)
    assert {d.detail for d in result.decisions} == {"B: untolerated taint dedicated=db:NoSchedule"}


def _d3(reported_cpu: int, age: timedelta) -> Plan:
    """A reports `reported_cpu`, `age` old; H is hot (90%), M between the marks (60%)."""
    cluster = Cluster(
        {"A": {"a": reported_cpu}, "H": {"h1000": 1000, "h2600": 2600}, "M": {"m2400": 2400}},
        reported_at={"A": NOW - age},
    )
    args = {**D1_ARGS, "lowThresholds": {"cpu": 45}, "nodeMetricExpirationSeconds": 180}
    return cluster.run(args)


def test_d3_stale_metrics_are_ignored() -> None:
    """D3: A's 95% report is 300s old: neither source nor destination, reason metrics_expired."""
    result = _d3(3800, timedelta(seconds=300))
    report = result.nodes[objects.NodeName("A")]
    assert (report.role, report.reason) == (Role.UNKNOWN, "metrics_expired")
    assert report.detail == "node A's NodeMetric is 300s old"
    assert [d for d in result.decisions if d.source == "A"] == []
    assert result.evicted == ()
    assert result.pools[0].destinations == ()


def test_d3_fresh_metrics_make_a_destination_again() -> None:
    """D3: once A reports a fresh 40%, it is a destination again and receives H's pod."""
    result = _d3(1600, timedelta(seconds=30))
    assert result.nodes[objects.NodeName("A")].role is Role.DESTINATION
    assert _summary(result) == [("h1000", "A", None)]


def test_would_overload_the_only_destination() -> None:
    """Every candidate would push the only destination above its high mark: refused."""
    cluster = Cluster({"A": {"a1700": 1700, "a2000": 2000}, "B": {"b1200": 1200}})
    result = cluster.run(D1_ARGS)
    assert _summary(result) == [
        ("a1700", None, "would_overload_destination"),
        ("a2000", None, "would_overload_destination"),
    ]
    assert cluster.attempts == []
    assert _cpu(result, "B") == 1200


def test_evictor_refusal_feeds_back() -> None:
    """A refused eviction changes nothing; the next candidate is tried."""
    cluster = Cluster({"A": D1_A, "B": {"b400": 400}})
    result = cluster.run(
        D1_ARGS, refuse=lambda d: "limit_reached" if d.pod.name == "a1000" else None
    )
    assert _summary(result) == [("a1000", "B", "limit_reached"), ("a1200", "B", None)]
    assert (_cpu(result, "A"), _cpu(result, "B")) == (2500, 1600)


def test_refusal_objects_carry_their_detail() -> None:
    """A framework-style refusal (reason + str) keeps its words."""

    @dataclass(frozen=True)
    class Refusal:
        reason: str
        detail: str

        def __str__(self) -> str:
            return f"DefaultEvictor: {self.detail}"

    cluster = Cluster({"A": D1_A, "B": {"b400": 400}})
    result = cluster.run(
        D1_ARGS,
        evictable=lambda p: (
            Refusal("filtered", "pod has local storage") if p.name == "a1000" else None
        ),
    )
    first = result.decisions[0]
    assert (first.pod.name, first.reason, first.detail) == (
        "a1000",
        "filtered",
        "DefaultEvictor: pod has local storage",
    )
    assert result.evicted[0].pod.name == "a1200"


def test_reranks_after_each_eviction() -> None:
    """After a partial relief the pod that best covers what is left goes next."""
    cluster = Cluster(
        {"A": {"a800": 800, "a700": 700, "a150": 150, "a100": 100, "a2000": 2000}, "B": {"b0": 0}},
        pod_kw={"a2000": {"priority": 100}},
    )  # 3750m: excess 950m, no pod covers it
    result = cluster.run(D1_ARGS)
    assert _summary(result) == [("a800", "B", None), ("a150", "B", None)]
    assert _cpu(result, "A") == 2800


def test_cool_down_skips_siblings() -> None:
    """After one pod of a workload is evicted, its siblings get cool_down, in this and later cycles."""
    same = {"owner_name": "web"}
    spec = {"A": {"web-a": 500, "web-b": 450, "big": 2750}, "B": {"b400": 400}}
    cluster = Cluster(spec, pod_kw={"web-a": same, "web-b": same, "big": {"priority": 100}})
    cool_down = CoolDown()
    result = cluster.run(D1_ARGS, cool_down=cool_down)
    assert _summary(result) == [
        ("web-a", "B", None),
        ("web-b", None, "cool_down"),
        ("big", None, "would_overload_destination"),
    ]
    later = cluster.run(D1_ARGS, cool_down=cool_down, now=NOW + timedelta(minutes=4))
    assert _summary(later)[:2] == [("web-a", None, "cool_down"), ("web-b", None, "cool_down")]
    after = cluster.run(D1_ARGS, cool_down=cool_down, now=NOW + timedelta(minutes=5))
    assert _summary(after)[0] == ("web-a", "B", None)


@pytest.mark.parametrize(
    ("args", "evicted"),
    [
        pytest.param(
            {"evictableNamespaces": {"exclude": ["default"]}}, [], id="namespace-excluded"
        ),
        pytest.param(
            {"podSelectors": [{"name": "movable", "selector": {"matchLabels": {"move": "yes"}}}]},
            ["a600"],
            id="pod-selector",
        ),
    ],
)
def test_args_filters(args: Mapping[str, Any], evicted: list[str]) -> None:
    """evictableNamespaces and podSelectors mark the pods they exclude as filtered."""
    cluster = Cluster({"A": D1_A, "B": {"b400": 400}}, pod_kw={"a600": {"labels": {"move": "yes"}}})
    result = cluster.run({**D1_ARGS, **args})
    assert [d.pod.name for d in result.evicted] == evicted
    assert {d.reason for d in result.decisions if not d.evicted} == {"filtered"}


def test_number_of_nodes() -> None:
    """No more underutilized nodes than numberOfNodes: nothing happens."""
    cluster = Cluster({"A": D1_A, "B": {"b400": 400}})
    result = cluster.run({**D1_ARGS, "numberOfNodes": 1})
    assert result.decisions == ()
    assert result.pools[0].reason == "no_destination"
    assert result.pools[0].detail == "1 underutilized nodes, numberOfNodes is 1"


def test_anomaly_over_cycles() -> None:
    """consecutiveAbnormalities 3: A is acted on at its third hot cycle, not before."""
    cluster = Cluster({"A": D1_A, "B": {"b400": 400}, "C": {"c2000": 2000}})
    args = {**D1_ARGS, "anomalyCondition": {"consecutiveAbnormalities": 3}}
    detector = AnomalyDetector()
    cycles = [
        cluster.run(args, now=NOW + timedelta(minutes=i), detector=detector) for i in range(3)
    ]
    assert [len(c.evicted) for c in cycles] == [0, 0, 1]
    first = cycles[0].nodes[objects.NodeName("A")]
    assert (first.role, first.reason) == (Role.NEITHER, "not_source")
    assert first.detail == "cpu usage 92.50% > high mark 70.00%; hot for 1 of 3 readings"


def test_node_pools_are_balanced_separately() -> None:
    """Each node goes to its first matching pool, with that pool's marks and destinations."""
    big = {"labels": {"pool": "big"}}
    cluster = Cluster(
        {
            "X1": {"x1-a": 1200, "x1-b": 1200},  # 60%: hot in "big" (high 50)
            "X2": {"x2": 300},  # 7.5%: low in "big"
            "Y1": {"y1": 2400},  # 60%: between the marks in "rest"
            "Y2": {"y2": 400},  # 10%: low in "rest"
        },
        node_kw={"X1": big, "X2": big},
    )
    pools = [
        {
            "name": "big",
            "nodeSelector": {"matchLabels": {"pool": "big"}},
            "lowThresholds": {"cpu": 10},
            "highThresholds": {"cpu": 50},
        },
        {"name": "rest"},
    ]
    result = cluster.run({**D1_ARGS, "nodePools": pools})
    assert _summary(result) == [("x1-a", "X2", None)]
    assert [(p.name, p.sources, p.destinations) for p in result.pools] == [
        ("big", ("X1",), ("X2",)),
        ("rest", (), ("Y2",)),
    ]
    reversed_pools = cluster.run({**D1_ARGS, "nodePools": pools[::-1]})
    assert reversed_pools.decisions == ()  # "rest" (no selector) takes every node first
    assert {r.pool for r in reversed_pools.nodes.values()} == {"rest"}


def test_unpooled_nodes_are_reported() -> None:
    """A node no pool selects is neither source nor destination."""
    cluster = Cluster({"A": D1_A, "B": {"b400": 400}})
    pools = [{"name": "labelled", "nodeSelector": {"matchLabels": {"pool": "x"}}}]
    result = cluster.run({**D1_ARGS, "nodePools": pools})
    assert {r.role for r in result.nodes.values()} == {Role.UNPOOLED}
    assert result.decisions == ()


def test_prod_thresholds_move_prod_pods_only() -> None:
    """A node hot on prod load gives up prod pods only, to a node low on prod load."""
    cluster = Cluster(
        {
            "P": {"prod-a": 1400, "prod-b": 1000, "batch-a": 600},  # 75% total, prod 60%
            "D": {"d-prod": 400, "d-batch": 400},  # 20% total, prod 10%
        },
        pod_kw={"batch-a": {"qos": KoordQOS.BE}, "d-batch": {"qos": KoordQOS.BE}},
    )
    args = {
        "lowThresholds": {"cpu": 30},
        "highThresholds": {"cpu": 90},
        "prodLowThresholds": {"cpu": 20},
        "prodHighThresholds": {"cpu": 50},
        "anomalyCondition": {"consecutiveAbnormalities": 1},
    }
    result = cluster.run(args)
    assert _summary(result) == [("prod-b", "D", None)]
    assert result.decisions[0].track is Track.PROD
    assert result.decisions[0].detail == "prod cpu usage 60.00% > high mark 50.00%"
    p = objects.NodeName("P")
    assert (result.ledger.prod_usage(p).cpu, result.ledger.usage(p).cpu) == (1400, 2000)
    assert result.nodes[p].track is Track.PROD


def test_dry_run_fork_leaves_no_trace() -> None:
    """Planning against a forked cool-down twice reaches the same decisions (D6)."""
    same = {"owner_name": "web"}
    cluster = Cluster(
        {"A": {"web-a": 1000, "web-b": 2700}, "B": {"b400": 400}},
        pod_kw={"web-a": same, "web-b": same},
    )
    cool_down = CoolDown()
    first = cluster.run(D1_ARGS, cool_down=cool_down.fork())
    second = cluster.run(D1_ARGS, cool_down=cool_down.fork(), now=NOW + timedelta(minutes=1))
    assert _summary(first) == _summary(second) == [("web-a", "B", None)]
    assert cool_down.tracked == 0


def test_finished_pods_are_not_candidates() -> None:
    """Succeeded and Failed pods are neither tried nor counted in requests."""
    cluster = Cluster(
        {"A": {"done": 0, **D1_A}, "B": {"b400": 400}}, pod_kw={"done": {"phase": "Succeeded"}}
    )
    result = cluster.run(D1_ARGS)
    assert [d.pod.name for d in result.decisions] == ["a1000"]


def _names(decisions: Sequence[Decision]) -> list[str]:
    return [d.pod.name for d in decisions]


def test_hottest_source_first() -> None:
    """Two sources share one destination: the hotter is drained first."""
    cluster = Cluster(
        {
            "A": {"a1000": 1000, "a2700": 2700},  # 92.5%
            "Z": {"z1000": 1000, "z2900": 2900},  # 97.5%
            "B": {"b400": 400},
        }
    )
    result = cluster.run(D1_ARGS)
    assert _names(result.evicted) == ["z1000", "a1000"]
    assert [p.sources for p in result.pools] == [("Z", "A")]
