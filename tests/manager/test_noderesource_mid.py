"""manager.noderesource.mid: the Mid knobs of colocation-config and the Mid formula's rules."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime

import pytest

from kube import quantity
from manager.noderesource import ColocationStrategy, mid, parse_colocation_config
from tests.builders import make_node, make_nodemetric, make_pod

NOW = datetime(2026, 1, 1, tzinfo=UTC)
GI = 2**30


def test_mid_knobs_default_to_koordinators_and_parse() -> None:
    """Unset Mid knobs are Koordinator's defaults (100, 100, 0); set ones are read, per nodeConfig too."""
    assert parse_colocation_config("{}").cluster.mid_cpu_threshold_percent == 100
    raw = {
        "midCPUThresholdPercent": 40,
        "midMemoryThresholdPercent": 50.0,
        "midUnallocatedPercent": 20,
        "midReclaimMode": "static",
        "midStaticCPUReservedPercent": 5,
        "nodeConfigs": [{"nodeSelector": {"matchLabels": {"a": "b"}}, "midUnallocatedPercent": 0}],
    }
    cfg = parse_colocation_config(json.dumps(raw))
    found = cfg.cluster
    assert (found.mid_cpu_threshold_percent, found.mid_memory_threshold_percent) == (40, 50)
    assert (found.mid_unallocated_percent, found.mid_reclaim_mode) == (20, "static")
    assert found.mid_static_cpu_reserved_percent == 5
    assert cfg.for_node({"a": "b"}).mid_unallocated_percent == 0
    assert cfg.for_node({"a": "b"}).mid_cpu_threshold_percent == 40


def test_invalid_mid_knobs_are_refused_naming_the_field() -> None:
    """Out-of-range percentages and an unknown midReclaimMode are each reported with their path."""
    raw = {
        "midCPUThresholdPercent": 101,
        "midMemoryThresholdPercent": -1,
        "midUnallocatedPercent": "10",
        "midReclaimMode": "dynamic",
        "midStaticMemoryReservedPercent": -5,
    }
    with pytest.raises(ValueError) as err:
        parse_colocation_config(json.dumps(raw))
    fields = [line.split(":")[0] for line in str(err.value).splitlines()]
    assert fields == [
        "colocation-config.midCPUThresholdPercent",
        "colocation-config.midMemoryThresholdPercent",
        "colocation-config.midUnallocatedPercent",
        "colocation-config.midReclaimMode",
        "colocation-config.midStaticMemoryReservedPercent",
    ]


def test_unallocated_counts_prod_requests_only() -> None:
    """Mid, Batch and Free pods do not shrink the unallocated share; Prod and unlabelled ones do."""
    node = make_node("n1", cpu="10", memory="16Gi")
    metric = make_nodemetric("n1", node_cpu=2000, node_memory=4 * GI, update_time=NOW)
    strategy = ColocationStrategy(enable=True, mid_unallocated_percent=100)
    pods = [
        make_pod("prod", node="n1", cpu="3", memory="2Gi", priority=9000),
        make_pod("plain", node="n1", cpu="1", memory="1Gi"),
        make_pod("m", node="n1", cpu="4", memory="4Gi", priority=7000),
        make_pod("b", node="n1", cpu="2", memory="4Gi", priority=5000),
    ]
    found = mid.calculate(strategy, node, pods, metric, NOW)
    # no prodReclaimableMetric: only unallocated = capacity - systemUsage - Prod requests
    # (the NodeMetric has no pods, so all its usage, 2 cores and 4Gi, is the system's)
    assert (found.cpu, found.memory) == (10000 - 2000 - 4000, 16 * GI - 4 * GI - 3 * GI)


def test_reclaimable_is_capped_by_unused_and_the_threshold() -> None:
    """min(prodReclaimable, capacity - nodeUsage), then min with capacity x midCPUThresholdPercent."""
    node = make_node("n1", cpu="10", memory="16Gi")
    metric = make_nodemetric("n1", node_cpu=7000, node_memory=4 * GI, update_time=NOW)
    reclaimable = quantity.Resources({"cpu": 5000, "memory": 8 * GI})
    metric = dataclasses.replace(
        metric, status=dataclasses.replace(metric.status, prod_reclaimable=reclaimable)
    )
    found = mid.calculate(ColocationStrategy(enable=True), node, [], metric, NOW)
    assert (found.cpu, found.memory) == (3000, 8 * GI)
    capped = ColocationStrategy(enable=True, mid_cpu_threshold_percent=20)
    assert mid.calculate(capped, node, [], metric, NOW).cpu == 2000
