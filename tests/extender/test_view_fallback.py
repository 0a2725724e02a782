"""LoadAwareScheduling when a node has measured nothing yet: what the filter and
the scores read instead, and that "no data" is never read as "idle" (issue #27)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from extender import args as argsmod
from extender.nodeload import Source
from extender.plugins.loadaware import plugin
from extender.view import ClusterView
from tests.builders import T0, make_node_dict, make_nodemetric_dict, make_pod_dict

NOW = T0.timestamp() + 30


def clock() -> float:
    return NOW


def view_with(metric: dict[str, Any] | None, *pods: dict[str, Any], **args: Any) -> ClusterView:
    """One 4-core node `n1` with `metric` (None: no NodeMetric) and `pods` bound to it."""
    view = ClusterView(argsmod.decode_args(args), clock=clock)
    view.on_node("ADDED", None, view.project_node(make_node_dict("n1")))
    if metric is not None:
        view.on_metric("ADDED", None, view.project_metric(metric))
    for pod in pods:
        view.on_pod("ADDED", None, view.project_pod(pod))
    return view


def just_started() -> dict[str, Any]:
    """The NodeMetric of an agent that has reported once, before any usage sample."""
    metric = make_nodemetric_dict("n1", aggregated=False)
    metric["status"]["nodeMetric"] = {"nodeUsage": {}}
    return metric


def busy() -> dict[str, Any]:
    """A pod on n1 requesting 3 cores: estimated 2.55 cores (85 percent), 64 percent of n1."""
    return make_pod_dict("busy", node="n1", cpu="3", memory="64Mi")


def incoming(cpu: str = "1") -> Any:
    return make_pod_dict("new", node=None, cpu=cpu, memory="64Mi")


def test_a_node_whose_agent_started_is_not_refused_on_a_guess() -> None:
    """NodeMetric without usage yet: the filter passes it (as Koordinator) rather than refuse
    on estimates; the score, below, reads the estimates, never an idle node."""
    view = view_with(just_started(), busy())
    assert view.filter(view.project_pod(incoming()), ["n1"]).passed == ["n1"]


def test_a_node_without_a_nodemetric_passes_unjudged_as_in_koordinator() -> None:
    """No agent there at all: nothing measures it, so the filter passes it and scores it 0."""
    view = view_with(None, busy())
    pod = view.project_pod(incoming())
    assert view.filter(pod, ["n1"]).passed == ["n1"]
    assert view.scores(pod, ["n1"]) == [0]


def test_an_empty_node_that_measured_nothing_still_takes_pods() -> None:
    """Nothing bound, nothing measured: the estimates are 0 and the pod passes."""
    view = view_with(just_started())
    assert view.filter(view.project_pod(incoming()), ["n1"]).passed == ["n1"]


def test_an_empty_nodeusage_is_not_read_as_an_idle_node() -> None:
    """Koordinator reads `nodeUsage: {}` as 0 usage; nodeqos scores the estimates instead."""
    started = view_with(just_started(), busy())
    empty = view_with(just_started())
    pod = empty.project_pod(incoming("100m"))
    assert started.node_usage("n1") is None
    (started_score,) = started.scores(pod, ["n1"])
    (empty_score,) = empty.scores(pod, ["n1"])
    # busy's 2.55 estimated cores cost the node 64 points of cpu headroom (weight 1 of 2)
    assert empty_score - started_score == 32


def test_a_node_without_a_nodemetric_scores_zero() -> None:
    """As Koordinator: no NodeMetric, no load-aware preference for the node."""
    view = view_with(None)
    assert view.scores(view.project_pod(incoming()), ["n1"]) == [0]


def test_an_expired_nodemetric_falls_back_to_the_estimates() -> None:
    """enableScheduleWhenNodeMetricsExpired (default): judged on the pods' estimates, not let through."""
    stale = make_nodemetric_dict("n1", node_cpu="100m", update_time=T0.replace(year=T0.year - 1))
    view = view_with(stale, busy())
    verdict = view.filter(view.project_pod(incoming()), ["n1"])
    assert verdict.failed == {
        "n1": "node n1: cpu usage 85 percent > threshold 65 percent"
        " (NodeMetric expired: estimated from pod requests)"
    }
    assert view.filter(view.project_pod(incoming("10m")), ["n1"]).passed == ["n1"]


def test_a_missing_aggregate_falls_back_to_the_instant_usage() -> None:
    """p95 over 10m not reported yet (agent up for 2 minutes): the instant nodeUsage is judged."""
    metric = make_nodemetric_dict("n1", node_cpu="3", aggregated=False)
    args = {
        "aggregated": {
            "usageThresholds": {"cpu": 70},
            "usageAggregationType": "p95",
            "usageAggregatedDuration": "10m",
        }
    }
    view = view_with(metric, **args)
    verdict = view.filter(view.project_pod(incoming()), ["n1"])
    assert verdict.failed == {
        "n1": "node n1: cpu p95 usage 96 percent > threshold 70 percent"
        " (aggregate not reported yet: instant nodeUsage)"
    }
    assert view.sources()[Source.NODE_USAGE] == 1


def test_a_full_nodemetric_reason_names_no_fallback() -> None:
    """A measured node's reason is unchanged (no suffix): the fallback note is only for fallbacks."""
    view = view_with(make_nodemetric_dict("n1", node_cpu="2.9"))
    verdict = view.filter(view.project_pod(incoming("250m")), ["n1"])
    assert verdict.failed == {"n1": "node n1: cpu usage 78 percent > threshold 65 percent"}


def test_the_nodes_gauge_counts_each_source() -> None:
    """nodeqos_extender_nodes{source} says how many nodes are judged on what."""
    view = ClusterView(argsmod.decode_args({}), clock=clock)
    metrics = {
        "measured": make_nodemetric_dict("measured", node_cpu="1"),
        "started": {**just_started(), "metadata": {"name": "started"}},
        "stale": make_nodemetric_dict("stale", update_time=T0.replace(year=T0.year - 1)),
    }
    for name in ("measured", "started", "stale", "bare"):
        view.on_node("ADDED", None, view.project_node(make_node_dict(name)))
        if name in metrics:
            view.on_metric("ADDED", None, view.project_metric(metrics[name]))
    registry = CollectorRegistry()
    plugin.wrap(view, registry)
    counts = {
        source.value: registry.get_sample_value("nodeqos_extender_nodes", {"source": source.value})
        for source in Source
    }
    assert counts == {
        "metric": 1,
        "nodeUsage": 0,
        "estimate-no-usage": 1,
        "estimate-no-nodemetric": 1,
        "estimate-expired": 1,
    }
