"""LowNodeLoad node load from NodeMetric: sums, staleness, capacity, prod usage."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from descheduler.plugins.lownodeload import usage
from kube import slo
from kube.classify import KoordQOS, PriorityClass
from kube.objects import NodeName
from kube.quantity import Resources
from tests.builders import NODE_MEMORY_USAGE, T0, make_node, make_nodemetric, make_pod

EXPIRY = timedelta(seconds=180)


def test_load_is_system_usage_plus_pod_usage() -> None:
    """Node load = systemUsage + Σ podsMetric podUsage, per resource."""
    node = make_node("n1")
    metric = make_nodemetric("n1", pods={"a": 1200, "b": 300}, system_cpu=250)
    pods = [make_pod("a", node="n1"), make_pod("b", node="n1")]
    load = usage.node_load(node, metric, pods, now=T0, expiration=EXPIRY)
    assert isinstance(load, usage.NodeLoad)
    assert load.usage == {"cpu": 1750, "memory": NODE_MEMORY_USAGE, "pods": 2}
    assert usage.percentages(load.usage, load.capacity)["cpu"] == pytest.approx(43.75)


def test_pods_that_left_the_node_no_longer_count() -> None:
    """Only entries of pods still bound count: an evicted or rescheduled pod's usage is gone."""
    metric = make_nodemetric("n1", pods={"stay": 1000, "evicted": 1500, "moved": 700})
    pods = [make_pod("stay", node="n1"), make_pod("moved", node="n2")]
    load = usage.node_load(make_node("n1"), metric, pods[:1], now=T0, expiration=EXPIRY)
    assert isinstance(load, usage.NodeLoad)
    assert (load.usage.cpu, load.usage["pods"]) == (1000, 1)
    assert [e.key for e in load.entries] == ["default/stay"]
    assert usage.bound_load(metric, pods[:1]).cpu == 1000
    assert usage.bound_load(metric, pods).cpu == 1700  # bound_load trusts the pods it is given


def test_arrivals_count_where_they_land() -> None:
    """A pod projected to arrive this cycle counts on its destination, with one pod."""
    metric = make_nodemetric("n2", pods={"b": 400, "a": 1200})
    arrived = [make_pod("a", node="n1")]
    load = usage.node_load(
        make_node("n2"),
        metric,
        [make_pod("b", node="n2")],
        now=T0,
        expiration=EXPIRY,
        arrived=arrived,
    )
    assert isinstance(load, usage.NodeLoad)
    assert (load.usage.cpu, load.usage["pods"]) == (1600, 2)
    assert load.pods == (make_pod("b", node="n2"),)


def test_node_usage_field_is_not_used() -> None:
    """nodeUsage is ignored: a report whose nodeUsage disagrees still sums system + pods."""
    metric = make_nodemetric("n1", node_cpu=3900, pods={"a": 1000})  # system = 2900
    info = metric.status.node_metric
    assert info is not None
    skewed = slo.NodeMetricInfo(node_usage=info.node_usage, system_usage=Resources({"cpu": 100}))
    metric = slo.NodeMetric(
        metadata=metric.metadata,
        status=slo.NodeMetricStatus(
            update_time=T0, node_metric=skewed, pods_metric=metric.status.pods_metric
        ),
    )
    pods = [make_pod("a", node="n1")]
    load = usage.node_load(make_node("n1"), metric, pods, now=T0, expiration=EXPIRY)
    assert isinstance(load, usage.NodeLoad)
    assert load.usage.cpu == 1100


@pytest.mark.parametrize(
    ("metric", "why", "age"),
    [
        pytest.param(None, usage.Why.MISSING, None, id="no-nodemetric"),
        pytest.param(
            slo.NodeMetric(metadata=slo.ObjectMeta("n1")), usage.Why.NO_STATUS, None, id="no-status"
        ),
        pytest.param(
            make_nodemetric("n1", pods={"a": 100}, update_time=None),
            usage.Why.NO_STATUS,
            None,
            id="no-update-time",
        ),
        pytest.param(
            make_nodemetric("n1", pods={"a": 100}, update_time=T0 - timedelta(seconds=300)),
            usage.Why.EXPIRED,
            timedelta(seconds=300),
            id="300s-old",
        ),
        pytest.param(
            make_nodemetric("n1", pods={"a": 100}, update_time=T0 - EXPIRY),
            usage.Why.EXPIRED,
            EXPIRY,
            id="exactly-at-expiry",
        ),
    ],
)
def test_unknown_load(metric: slo.NodeMetric | None, why: usage.Why, age: timedelta | None) -> None:
    """Missing, reportless and stale NodeMetrics make the load unknown, saying why."""
    load = usage.node_load(make_node("n1"), metric, [], now=T0, expiration=EXPIRY)
    assert load == usage.Unavailable(NodeName("n1"), why, age)


def test_fresh_just_under_expiry() -> None:
    """A report one second younger than the expiry is used."""
    metric = make_nodemetric("n1", pods={"a": 100}, update_time=T0 - EXPIRY + timedelta(seconds=1))
    load = usage.node_load(make_node("n1"), metric, [], now=T0, expiration=EXPIRY)
    assert isinstance(load, usage.NodeLoad)


def test_expired_message_names_the_age() -> None:
    """The unavailable reason reads well in a report."""
    unavailable = usage.Unavailable(NodeName("n1"), usage.Why.EXPIRED, timedelta(seconds=300))
    assert str(unavailable) == "node n1's NodeMetric is 300s old"


def test_capacity_prefers_raw_allocatable() -> None:
    """The raw-allocatable annotation replaces allocatable (CPU normalisation)."""
    raw = json.dumps({"cpu": "2", "memory": "8Gi"})
    node = make_node("n1", annotations={"node.koordinator.sh/raw-allocatable": raw})
    assert usage.capacity_of(node) == {"cpu": 2000, "memory": 8 * 2**30}
    assert usage.capacity_of(make_node("n2"))["cpu"] == 4000


def test_prod_usage_counts_prod_pods_only() -> None:
    """Prod usage sums the reported usage of the node's prod pods."""
    pods = [
        make_pod("web", node="n1"),  # Burstable → LS → prod by default
        make_pod("batch", node="n1", qos=KoordQOS.BE),
        make_pod("mid", node="n1", labels={"koordinator.sh/priority-class": "koord-mid"}),
    ]
    metric = make_nodemetric("n1", pods={"web": 1000, "batch": 700, "mid": 300, "gone": 50})
    load = usage.node_load(make_node("n1"), metric, pods, now=T0, expiration=EXPIRY)
    assert isinstance(load, usage.NodeLoad)
    assert (load.prod_usage.cpu, load.prod_usage["pods"]) == (1000, 1)
    assert (load.usage.cpu, load.usage["pods"]) == (2000, 3)  # "gone" left the node


def test_pod_without_metric_uses_nothing() -> None:
    """A pod the report does not list has zero usage and is known to be unreported."""
    pods = [make_pod("a", node="n1"), make_pod("b", node="n1")]
    metric = make_nodemetric("n1", pods={"a": 400})
    load = usage.node_load(make_node("n1"), metric, pods, now=T0, expiration=EXPIRY)
    assert isinstance(load, usage.NodeLoad)
    assert load.usage_of(pods[0]).cpu == 400
    assert load.usage_of(pods[1]) == {}
    assert (load.has_usage(pods[0]), load.has_usage(pods[1])) == (True, False)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        pytest.param({}, PriorityClass.PROD, id="burstable-is-prod"),
        pytest.param({"qos": KoordQOS.BE}, PriorityClass.BATCH, id="be-is-batch"),
        pytest.param({"qos": KoordQOS.LSR}, PriorityClass.PROD, id="lsr-is-prod"),
        pytest.param({"priority": 7500}, PriorityClass.MID, id="priority-band"),
        pytest.param(
            {"labels": {"koordinator.sh/priority-class": "koord-free"}},
            PriorityClass.FREE,
            id="label",
        ),
    ],
)
def test_priority_class_defaults_from_qos(
    overrides: dict[str, object], expected: PriorityClass
) -> None:
    """Koordinator's GetPodPriorityClassWithDefault."""
    assert usage.priority_class(make_pod("p", **overrides)) is expected


def test_weighted_percent() -> None:
    """Σ weight * usage% / Σ weight; a resource without capacity counts 0%."""
    capacity = {"cpu": 4000, "memory": 1000}
    used = {"cpu": 2000, "memory": 100, "gpu": 1}
    assert usage.weighted_percent(used, capacity, {"cpu": 3, "memory": 1}) == pytest.approx(40.0)
    assert usage.weighted_percent(used, capacity, {"cpu": 1, "gpu": 1}) == pytest.approx(25.0)
    assert usage.weighted_percent(used, capacity, {}) == 0.0
