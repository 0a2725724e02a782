"""NodeMetric and NodeSLO objects written by anyone: each decodes or raises ValueError
(the informers drop such an object and count it); a NodeSLO spec merges with errors listed."""

from __future__ import annotations

import contextlib
from typing import Any

from hypothesis import given

from agent import reporter
from extender import args as extender_args
from extender import loads
from kube import nodeslo, slo
from tests.properties.strategies import json_values, mutated

USAGE = {"resources": {"cpu": "1500m", "memory": "4Gi"}}
NODEMETRIC: dict[str, Any] = {
    "apiVersion": slo.API_VERSION,
    "kind": "NodeMetric",
    "metadata": {
        "name": "n1",
        "uid": "u1",
        "resourceVersion": "7",
        "labels": {"a": "b"},
        "creationTimestamp": "2026-01-01T00:00:00Z",
    },
    "spec": {
        "metricCollectPolicy": {
            "aggregateDurationSeconds": 300,
            "reportIntervalSeconds": 60,
            "nodeAggregatePolicy": {"durations": ["5m0s", "10m0s"]},
            "nodeMemoryCollectPolicy": "usageWithoutPageCache",
        }
    },
    "status": {
        "updateTime": "2026-01-01T00:01:00Z",
        "nodeMetric": {
            "nodeUsage": USAGE,
            "systemUsage": USAGE,
            "aggregatedNodeUsages": [
                {"duration": "5m0s", "usage": {"avg": USAGE, "p95": USAGE}},
            ],
            "aggregatedSystemUsages": [{"duration": "5m0s", "usage": {"p50": USAGE}}],
        },
        "podsMetric": [
            {
                "name": "web",
                "namespace": "shop",
                "podUsage": USAGE,
                "priority": "koord-prod",
                "qos": "LS",
            }
        ],
    },
}

NODESLO_SPEC: dict[str, Any] = {
    "resourceUsedThresholdWithBE": {
        "enable": True,
        "cpuSuppressThresholdPercent": 65,
        "cpuSuppressPolicy": "cpuset",
        "memoryEvictThresholdPercent": 70,
        "memoryEvictLowerPercent": 68,
        "cpuEvictBESatisfactionUpperPercent": 80,
        "cpuEvictBESatisfactionLowerPercent": 60,
    },
    "cpuBurstStrategy": {
        "policy": "auto",
        "cpuBurstPercent": 1000,
        "cfsQuotaBurstPercent": 300,
        "sharePoolThresholdPercent": 50,
    },
    "resourceQOSStrategy": {
        "beClass": {"resctrlQOS": {"catRangeStartPercent": 0, "catRangeEndPercent": 30}}
    },
    "systemStrategy": {"minFreeKbytesFactor": 100},
}

PROJECT = loads.metric_projector(extender_args.decode_args({}))


def test_the_base_objects_are_valid() -> None:
    """The objects the mutations start from decode cleanly (else they test nothing)."""
    assert slo.NodeMetric.from_api(NODEMETRIC).status.pods_metric
    assert PROJECT(NODEMETRIC).node_usage is not None
    assert nodeslo.merge_over_defaults(NODESLO_SPEC)[1] == []
    nodeslo.NodeSLO.from_api({"metadata": {"name": "n1"}, "spec": NODESLO_SPEC})


@given(mutated(NODEMETRIC))
def test_a_nodemetric_decodes_or_raises_value_error(obj: Any) -> None:
    """NodeMetric.from_api and the extender's projection: a model, or ValueError."""
    if not isinstance(obj, dict):
        obj = {"status": obj}
    with contextlib.suppress(ValueError):
        slo.NodeMetric.from_api(obj)
    with contextlib.suppress(ValueError):
        PROJECT(obj)


@given(mutated(NODESLO_SPEC))
def test_a_nodeslo_spec_merges_with_every_error_listed(spec: Any) -> None:
    """merge_over_defaults never raises; errors name a field under spec."""
    merged, errors = nodeslo.merge_over_defaults(spec if isinstance(spec, dict) else {"x": spec})
    assert merged.thresholds is not None
    assert all(error.startswith("spec") for error in errors), errors


@given(mutated({"metadata": {"name": "n1"}, "spec": NODESLO_SPEC}, json_values))
def test_a_nodeslo_decodes_or_raises_value_error(obj: Any) -> None:
    """NodeSLO.from_api: a model, or ValueError listing the invalid fields."""
    with contextlib.suppress(ValueError):
        nodeslo.NodeSLO.from_api(obj if isinstance(obj, dict) else {"spec": obj})


@given(mutated(NODEMETRIC["spec"]))
def test_the_agent_reads_any_spec_as_a_policy_or_the_defaults(spec: Any) -> None:
    """The reporter's view of a NodeMetric spec another tool wrote: a policy with a usable
    report interval, or ValueError (the reporter then uses the defaults and says so)."""
    try:
        policy = reporter.parse_policy({"spec": spec})
    except ValueError:
        policy = None
    interval = reporter.report_interval(policy)
    assert isinstance(interval, float)
    assert interval >= reporter.MIN_REPORT_INTERVAL
