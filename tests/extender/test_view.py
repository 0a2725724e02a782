"""ClusterView: LoadAwareScheduling's filter and score, and the estimator, on built objects."""

from __future__ import annotations

import json
import random
from datetime import timedelta
from typing import Any

import pytest

from extender import args as argsmod
from extender.view import ClusterView
from tests.builders import T0, make_node_dict, make_nodemetric_dict, make_pod_dict

NOW = T0.timestamp() + 30  # the NodeMetrics below were updated 30 s ago


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def view_of(
    nodes: dict[str, dict[str, Any]],
    pods: list[dict[str, Any]] = (),  # type: ignore[assignment]
    clock: Clock | None = None,
    **args: Any,
) -> ClusterView:
    """A view fed as the informers would: nodes with their NodeMetric kwargs, then bound pods."""
    view = ClusterView(argsmod.decode_args(args), clock=clock or Clock())
    for name, metric in nodes.items():
        view.on_node("ADDED", None, view.project_node(make_node_dict(name)))
        if metric is not None:
            view.on_metric("ADDED", None, view.project_metric(make_nodemetric_dict(name, **metric)))
    for pod in pods:
        view.on_pod("ADDED", None, view.project_pod(pod))
    return view


def incoming(
    name: str = "new", cpu: str | None = "1", memory: str | None = "1Gi", **kw: Any
) -> Any:
    return make_pod_dict(name, node=None, cpu=cpu, memory=memory, **kw)


def test_a_node_over_the_cpu_threshold_is_refused_with_a_reason() -> None:
    """n1 at 78% cpu (3.1 of 4 cores) is refused; the reason names node, resource, usage, threshold."""
    view = view_of({"n1": {"node_cpu": "2.9"}, "n2": {"node_cpu": "0.4"}})
    pod = view.project_pod(incoming(cpu="250m", memory="64Mi"))
    verdict = view.filter(pod, ["n1", "n2"])
    assert verdict.passed == ["n2"]
    # 2.9 cores measured + 250m x 85% estimated = 3.1125 of 4 = 78%
    assert verdict.failed == {"n1": "node n1: cpu usage 78 percent > threshold 65 percent"}


def test_the_incoming_pod_estimate_counts_against_the_threshold() -> None:
    """60% measured passes a small pod but refuses one whose estimate pushes it over 65%."""
    view = view_of({"n1": {"node_cpu": "2.4"}})
    assert view.filter(view.project_pod(incoming(cpu="100m")), ["n1"]).passed == ["n1"]
    assert view.filter(view.project_pod(incoming(cpu="1")), ["n1"]).passed == []


@pytest.mark.parametrize(
    ("requests", "limits", "expected"),
    [
        pytest.param({"cpu": "1"}, {}, 850, id="request-times-85pct"),
        pytest.param({"cpu": "1"}, {"cpu": "2"}, 1700, id="limit-above-request-wins"),
        pytest.param({}, {}, 250, id="no-request-defaults-250m"),
        pytest.param({"cpu": "1"}, {"cpu": "1"}, 850, id="capped-at-limit"),
    ],
)
def test_the_estimate_follows_koordinator_default_estimator(
    requests: dict[str, str], limits: dict[str, str], expected: int
) -> None:
    """max(request, limit) x scaling factor, capped at the limit, 250m when nothing is asked."""
    raw = incoming(cpu=None, memory=None)
    raw["spec"]["containers"][0]["resources"] = {"requests": requests, "limits": limits}
    view = view_of({})
    assert view.project_pod(raw).estimate[0] == expected


def test_pods_not_yet_in_the_nodemetric_count_with_their_estimate() -> None:
    """A pod bound after the last report counts 85% of its request until the NodeMetric has it."""
    bound = make_pod_dict("fresh", node="n1", cpu="2", memory="1Gi")
    bound["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2024-05-01T10:00:00Z"}
    ]
    view = view_of({"n1": {"node_cpu": "1"}}, [bound])
    assert view.node_usage("n1")["cpu"] == 1000 + 1700  # type: ignore[index]
    # the next report measures it: its measured usage replaces the estimate
    fresh_report = make_nodemetric_dict("n1", pods={"default/fresh": "500m"}, system_cpu="1")
    view.on_metric("MODIFIED", None, view.project_metric(fresh_report))
    assert view.node_usage("n1")["cpu"] == 1500  # type: ignore[index]


def test_a_recently_scheduled_pod_counts_the_estimate_above_its_measured_usage() -> None:
    """Scheduled within one report interval of updateTime: max(0, estimate - measured) is added."""
    pod = make_pod_dict("warm", node="n1", cpu="2")
    pod["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2024-05-01T11:59:50Z"}
    ]
    metric = {"pods": {"default/warm": "300m"}, "system_cpu": "0"}
    view = view_of({"n1": metric}, [pod])
    assert view.node_usage("n1")["cpu"] == 300 + (1700 - 300)  # type: ignore[index]


def test_pods_that_left_the_node_stop_counting_at_once() -> None:
    """An evicted pod's podsMetric usage is taken off the node before the next report."""
    hog = make_pod_dict("hog", node="n1", cpu="1", created=None)
    hog["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2024-05-01T10:00:00Z"}
    ]
    view = view_of({"n1": {"pods": {"default/hog": "2500m"}, "system_cpu": "200m"}}, [hog])
    assert view.node_usage("n1")["cpu"] == 2700  # type: ignore[index]
    view.on_pod("DELETED", view.project_pod(hog), None)
    assert view.node_usage("n1")["cpu"] == 200  # type: ignore[index]


def burst(view: ClusterView, seed: int, *, bindings_seen: bool) -> list[str]:
    """Six 1-core pods scheduled back to back as kube-scheduler does: each goes to a
    best-scored node (ties at random). With `bindings_seen`, a pod's binding reaches
    the watch after the next pod has been scored (the binding cycle is asynchronous);
    without, no binding arrives during the burst at all."""
    placed: list[str] = []
    rng = random.Random(seed)
    pending = None
    for i in range(6):
        raw = incoming(f"p{i}", cpu="1", uid=f"uid-{i}")
        scores = view.prioritize(view.project_pod(raw), ["n1", "n2", "n3"])
        best = max(score for _, score in scores)
        placed.append(rng.choice([name for name, score in scores if score == best]))
        if pending is not None and bindings_seen:
            view.on_pod("MODIFIED", None, view.project_pod(pending))
        pending = dict(raw, spec={**raw["spec"], "nodeName": placed[-1]})
    return placed


COOLEST_FIRST = {"n1": {"node_cpu": "200m"}, "n2": {"node_cpu": "1"}, "n3": {"node_cpu": "1"}}


@pytest.mark.parametrize("seed", range(5))
def test_a_burst_is_spread_when_bindings_lag_one_pod_behind(seed: int) -> None:
    """n1 is the coolest; no node gets more than half of a six-pod burst."""
    placed = burst(view_of(COOLEST_FIRST), seed, bindings_seen=True)
    assert max(placed.count(n) for n in COOLEST_FIRST) <= 3, placed


@pytest.mark.parametrize("seed", range(5))
def test_expectations_alone_keep_a_burst_off_the_single_coolest_node(seed: int) -> None:
    """No binding seen during the burst: without expectations all six pile on n1, with them not."""
    blind = view_of(COOLEST_FIRST)
    blind._expect_ttl = 0.0  # expectations expire at once: the view only knows bindings
    assert burst(blind, seed, bindings_seen=False) == ["n1"] * 6
    placed = burst(view_of(COOLEST_FIRST), seed, bindings_seen=False)
    assert placed.count("n1") <= 4 and len(set(placed)) >= 2, placed


def test_a_seen_binding_replaces_the_expectation() -> None:
    """Once the watch shows the pod bound, it counts once, on its real node."""
    view = view_of({"n1": {"node_cpu": "300m"}, "n2": {"node_cpu": "2"}})
    raw = incoming("p", cpu="1", uid="uid-p")
    view.prioritize(view.project_pod(raw), ["n1", "n2"])
    assert view.expectations == 1
    assert view.node_usage("n1")["cpu"] == 300 + 850  # type: ignore[index]
    bound = dict(raw, spec={**raw["spec"], "nodeName": "n2"})
    view.on_pod("MODIFIED", None, view.project_pod(bound))
    assert view.expectations == 0
    assert view.node_usage("n1")["cpu"] == 300  # type: ignore[index]
    assert view.node_usage("n2")["cpu"] == 2000 + 850  # type: ignore[index]


def test_an_expectation_without_a_binding_expires() -> None:
    """A pod the scheduler placed elsewhere or gave up on stops counting after the TTL."""
    clock = Clock()
    view = view_of({"n1": {"node_cpu": "300m"}, "n2": {"node_cpu": "2"}}, clock=clock)
    view.prioritize(view.project_pod(incoming("p", uid="uid-p")), ["n1", "n2"])
    clock.now += 31
    assert view.node_usage("n1")["cpu"] == 300  # type: ignore[index]
    assert view.expectations == 0


def test_scores_prefer_the_node_with_the_most_measured_headroom() -> None:
    """Least-used scoring on measured usage, scaled to the protocol's 0..10."""
    view = view_of({"n1": {"node_cpu": "3"}, "n2": {"node_cpu": "200m"}})
    scores = dict(
        view.prioritize(view.project_pod(incoming(cpu="100m", memory="64Mi")), ["n1", "n2"])
    )
    assert scores["n2"] > scores["n1"]
    assert all(0 <= s <= 10 for s in scores.values())


@pytest.mark.parametrize(
    ("extra", "passes"),
    [
        pytest.param({}, True, id="default-schedules-when-expired"),
        pytest.param(
            {"enableScheduleWhenNodeMetricsExpired": False}, False, id="user-asks-to-block"
        ),
        pytest.param(
            {"enableScheduleWhenNodeMetricsExpired": False, "filterExpiredNodeMetrics": False},
            False,
            id="filter-off-judges-the-stale-usage",
        ),
    ],
)
def test_an_expired_nodemetric_blocks_only_when_asked(extra: dict[str, Any], passes: bool) -> None:
    """A hot node whose metric is 10 minutes old passes by default; refused when configured."""
    view = view_of({"n1": {"node_cpu": "3.9"}}, clock=Clock(T0.timestamp() + 600), **extra)
    verdict = view.filter(view.project_pod(incoming()), ["n1"])
    assert (verdict.passed == ["n1"]) is passes
    if not passes and "filterExpiredNodeMetrics" not in extra:
        assert verdict.failed["n1"].startswith("node n1: NodeMetric expired (last updated 600s ago")
    assert dict(view.prioritize(view.project_pod(incoming()), ["n1"])) == {"n1": 0}


def test_a_node_without_a_nodemetric_is_never_blocked_and_scores_zero() -> None:
    """No agent on the node: scheduling there is not load-aware, but not refused either."""
    view = view_of({"n1": None})  # type: ignore[dict-item]
    pod = view.project_pod(incoming())
    assert view.filter(pod, ["n1", "unknown"]).passed == ["n1", "unknown"]
    assert dict(view.prioritize(pod, ["n1"])) == {"n1": 0}


def test_daemonset_pods_are_never_filtered() -> None:
    """Koordinator lets DaemonSet pods onto hot nodes: they must run everywhere."""
    view = view_of({"n1": {"node_cpu": "3.9"}})
    pod = view.project_pod(incoming(owner="DaemonSet"))
    assert view.filter(pod, ["n1"]).passed == ["n1"]


def test_prod_thresholds_apply_to_prod_pods_on_prod_usage() -> None:
    """prodUsageThresholds: a prod pod is judged on prod pods' usage, a batch pod on the node's."""
    prod_hog = make_pod_dict(
        "ls", node="n1", cpu="1", labels={"koordinator.sh/priority-class": "koord-prod"}
    )
    metric = {"pods": {"default/ls": {"cpu": "1500m", "priority": "koord-prod"}}, "system_cpu": "1"}
    view = view_of(
        {"n1": metric}, [prod_hog], prodUsageThresholds={"cpu": 30}, usageThresholds={"cpu": 90}
    )
    prod = view.project_pod(
        incoming(cpu="100m", labels={"koordinator.sh/priority-class": "koord-prod"})
    )
    batch = view.project_pod(
        incoming(cpu="100m", labels={"koordinator.sh/priority-class": "koord-batch"})
    )
    assert view.filter(prod, ["n1"]).failed == {
        "n1": "node n1: cpu prod usage 40 percent > threshold 30 percent"
    }
    assert view.filter(batch, ["n1"]).passed == ["n1"]


def test_aggregated_thresholds_read_the_nodemetric_percentiles() -> None:
    """aggregated.usageThresholds with p95 over 5m judge the p95, not the instant usage."""
    metric = make_nodemetric_dict("n1", node_cpu="400m")
    for window in metric["status"]["nodeMetric"]["aggregatedNodeUsages"]:
        if window["duration"] == "5m0s":
            window["usage"]["p95"] = {"resources": {"cpu": "3500m", "memory": "1Gi"}}
    args = {
        "aggregated": {
            "usageThresholds": {"cpu": 70},
            "usageAggregationType": "p95",
            "usageAggregatedDuration": "5m",
        }
    }
    view = ClusterView(argsmod.decode_args(args), clock=Clock())
    view.on_node("ADDED", None, view.project_node(make_node_dict("n1")))
    view.on_metric("ADDED", None, view.project_metric(metric))
    verdict = view.filter(view.project_pod(incoming(cpu="100m")), ["n1"])
    assert verdict.failed == {"n1": "node n1: cpu p95 usage 90 percent > threshold 70 percent"}


def test_a_node_annotation_overrides_the_thresholds() -> None:
    """scheduling.koordinator.sh/usage-thresholds on a node tightens its cpu threshold."""
    view = view_of({"n1": {"node_cpu": "1600m"}})
    node = make_node_dict(
        "n1",
        annotations={
            "scheduling.koordinator.sh/usage-thresholds": json.dumps(
                {"usageThresholds": {"cpu": 30}}
            )
        },
    )
    view.on_node("MODIFIED", None, view.project_node(node))
    assert view.filter(view.project_pod(incoming(cpu="100m")), ["n1"]).failed == {
        "n1": "node n1: cpu usage 42 percent > threshold 30 percent"
    }


def test_a_garbled_node_annotation_keeps_the_configured_thresholds() -> None:
    """Bad JSON in the annotation is logged and ignored, never a crash."""
    view = view_of({"n1": {"node_cpu": "1600m"}})
    node = make_node_dict("n1", annotations={"scheduling.koordinator.sh/usage-thresholds": "{nope"})
    view.on_node("MODIFIED", None, view.project_node(node))
    assert view.filter(view.project_pod(incoming(cpu="100m")), ["n1"]).passed == ["n1"]


def test_raw_allocatable_is_the_denominator_when_annotated() -> None:
    """Koordinator's estimator uses node.koordinator.sh/raw-allocatable over status.allocatable."""
    view = view_of({"n1": {"node_cpu": "2"}})
    node = make_node_dict("n1", annotations={"node.koordinator.sh/raw-allocatable": '{"cpu": "8"}'})
    view.on_node("MODIFIED", None, view.project_node(node))
    assert view.filter(view.project_pod(incoming(cpu="100m")), ["n1"]).passed == ["n1"]


def test_a_single_candidate_after_filter_is_expected_there() -> None:
    """kube-scheduler skips prioritize for one feasible node, so filter records the expectation."""
    view = view_of({"n1": {"node_cpu": "3.9"}, "n2": {"node_cpu": "100m"}})
    view.filter(view.project_pod(incoming("p", uid="uid-p")), ["n1", "n2"])
    assert view.node_usage("n2")["cpu"] == 100 + 850  # type: ignore[index]


def test_finished_pods_do_not_count() -> None:
    """A Succeeded pod still bound to the node adds nothing."""
    done = make_pod_dict("done", node="n1", cpu="2", phase="Succeeded")
    view = view_of({"n1": {"node_cpu": "1"}}, [done])
    assert view.node_usage("n1")["cpu"] == 1000  # type: ignore[index]


def test_window_change_of_aggregated_is_respected() -> None:
    """scoreAggregationType scores on the aggregate of the configured window."""
    args = {"aggregated": {"scoreAggregationType": "p99", "scoreAggregatedDuration": "10m"}}
    view = ClusterView(argsmod.decode_args(args), clock=Clock())
    for name, p99 in (("n1", "3"), ("n2", "500m")):
        metric = make_nodemetric_dict(name, node_cpu="400m")
        for window in metric["status"]["nodeMetric"]["aggregatedNodeUsages"]:
            if window["duration"] == "10m0s":
                window["usage"]["p99"] = {"resources": {"cpu": p99, "memory": "1Gi"}}
        view.on_node("ADDED", None, view.project_node(make_node_dict(name)))
        view.on_metric("ADDED", None, view.project_metric(metric))
    scores = dict(view.prioritize(view.project_pod(incoming(cpu="100m")), ["n1", "n2"]))
    assert scores["n2"] > scores["n1"]
    assert argsmod.decode_args(args).aggregated.score_aggregated_duration == timedelta(minutes=10)  # type: ignore[union-attr]


def test_a_pod_without_a_podscheduled_time_is_as_old_as_its_creation() -> None:
    """Status rewritten without the condition's time: an old pod is not taken for a new one."""
    old = make_pod_dict("old", node="n1", cpu="2")  # created at T0 - 0, metric at T0
    old["metadata"]["creationTimestamp"] = "2024-05-01T10:00:00Z"
    old["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
    view = view_of({"n1": {"pods": {"default/old": "100m"}, "system_cpu": "0"}}, [old])
    assert view.node_usage("n1")["cpu"] == 100  # type: ignore[index]
