"""Koordinator v1.8 LowNodeLoad: node pools inherit the top-level args, case by case.

Source: koordinator-sh/koordinator
`pkg/descheduler/apis/config/v1alpha2/defaults_test.go` at v1.8.0
(commit 989ca85c62abcca92b303aa12fd2ccff2ed30fed), the `nodePools ...` rows of
TestSetDefaults_LowNodeLoadArgs: each row's args are loaded through nodeqos's
LowNodeLoad args (`Args.from_mapping`, the same path a configuration file takes)
and every pool's resolved fields are compared with the row's expected pool.
Koordinator's `SetDefaults_LowNodeLoadNodePools` copies each field a pool
leaves nil from the top level, and each anomaly count a pool leaves 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest

from descheduler import config
from descheduler.plugins import lownodeload
from tests.conformance import reference as ref
from tests.conformance.reference import differs, same

TITLE = "Koordinator v1.8 LowNodeLoad nodePools defaults"
FILE = "koordinator pkg/descheduler/apis/config/v1alpha2/defaults_test.go"
COMMIT = "989ca85c62abcca92b303aa12fd2ccff2ed30fed"  # v1.8.0

DEFAULT_ANOMALY = ("1m", 5, 3)  # defaultLoadAnomalyCondition
WEIGHTS_1_1 = {"cpu": 1, "memory": 1}
REFUSED = "refused at load: prodHighThresholds.cpu: must not exceed highThresholds.cpu (80)"


def expected_pool(
    name: str,
    *,
    high: Mapping[str, float] | None = None,
    low: Mapping[str, float] | None = None,
    prod_high: Mapping[str, float] | None = None,
    prod_low: Mapping[str, float] | None = None,
    weights: Mapping[str, int] = WEIGHTS_1_1,
    anomaly: tuple[str | None, int, int] | None = None,
) -> dict[str, Any]:
    """A pool as the row expects it; a nil threshold map compares as empty."""
    return {
        "name": name,
        "highThresholds": dict(high or {}),
        "lowThresholds": dict(low or {}),
        "prodHighThresholds": dict(prod_high or {}),
        "prodLowThresholds": dict(prod_low or {}),
        "resourceWeights": dict(weights),
        "anomalyCondition": anomaly,
    }


CASES = [
    pytest.param(
        {
            "highThresholds": {"cpu": 80, "memory": 80},
            "lowThresholds": {"cpu": 20, "memory": 20},
            "prodHighThresholds": {"cpu": 90},
            "prodLowThresholds": {"cpu": 10},
            "resourceWeights": {"cpu": 2},
            "anomalyCondition": {
                "timeout": "2m",
                "consecutiveAbnormalities": 10,
                "consecutiveNormalities": 5,
            },
            "nodePools": [{"name": "test-pool"}],
        },
        # prodHighThresholds.cpu 90 over highThresholds.cpu 80: Koordinator's own
        # validation refuses the inherited pool when a file loads; the table only defaults
        differs(
            [
                expected_pool(
                    "test-pool",
                    high={"cpu": 80, "memory": 80},
                    low={"cpu": 20, "memory": 20},
                    prod_high={"cpu": 90},
                    prod_low={"cpu": 10},
                    weights={"cpu": 2, "memory": 1},
                    anomaly=("2m", 10, 5),
                )
            ],
            REFUSED,
            "validated-args",
        ),
        id="TestSetDefaults_LowNodeLoadArgs/nodePools inherit all fields from top-level config",
    ),
    pytest.param(
        {
            "highThresholds": {"cpu": 80},
            "lowThresholds": {"cpu": 20},
            "nodePools": [{"name": "pool-1"}, {"name": "pool-2", "highThresholds": {"cpu": 70}}],
        },
        same(
            [
                expected_pool("pool-1", high={"cpu": 80}, low={"cpu": 20}, anomaly=DEFAULT_ANOMALY),
                expected_pool("pool-2", high={"cpu": 70}, low={"cpu": 20}, anomaly=DEFAULT_ANOMALY),
            ]
        ),
        id="TestSetDefaults_LowNodeLoadArgs/multiple nodePools inherit from top-level config",
    ),
    pytest.param(
        {
            "anomalyCondition": {
                "timeout": "2m",
                "consecutiveAbnormalities": 10,
                "consecutiveNormalities": 5,
            },
            "nodePools": [
                {
                    "name": "test-pool",
                    "anomalyCondition": {
                        "timeout": "1m",
                        "consecutiveAbnormalities": 0,
                        "consecutiveNormalities": 0,
                    },
                }
            ],
        },
        same([expected_pool("test-pool", anomaly=("1m", 10, 5))]),
        id="TestSetDefaults_LowNodeLoadArgs/nodePools with partial zero values inherit from "
        "top-level",
    ),
    pytest.param(
        {
            "highThresholds": {"cpu": 80},
            "lowThresholds": {"cpu": 20},
            "anomalyCondition": {
                "timeout": "1m",
                "consecutiveAbnormalities": 5,
                "consecutiveNormalities": 3,
            },
            "nodePools": [
                {
                    "name": "custom-pool",
                    "highThresholds": {"cpu": 70},
                    "lowThresholds": {"cpu": 30},
                    "anomalyCondition": {
                        "consecutiveAbnormalities": 3,
                        "consecutiveNormalities": 2,
                    },
                }
            ],
        },
        differs(
            [expected_pool("custom-pool", high={"cpu": 70}, low={"cpu": 30}, anomaly=(None, 3, 2))],
            [expected_pool("custom-pool", high={"cpu": 70}, low={"cpu": 30}, anomaly=("1m", 3, 2))],
            "pool-anomaly-timeout",
        ),
        id="TestSetDefaults_LowNodeLoadArgs/nodePools keep own config when specified",
    ),
]


def _duration(value: timedelta) -> str:
    minutes, seconds = divmod(int(value.total_seconds()), 60)
    return f"{minutes}m" if not seconds else f"{minutes}m{seconds}s"


def resolved(args: lownodeload.Args) -> list[dict[str, Any]]:
    pools = []
    for pool in args.node_pools:
        anomaly = pool.anomaly_condition
        pools.append(
            {
                "name": pool.name,
                "highThresholds": dict(pool.high_thresholds),
                "lowThresholds": dict(pool.low_thresholds),
                "prodHighThresholds": dict(pool.prod_high_thresholds),
                "prodLowThresholds": dict(pool.prod_low_thresholds),
                "resourceWeights": dict(pool.resource_weights),
                "anomalyCondition": (
                    _duration(anomaly.timeout),
                    anomaly.consecutive_abnormalities,
                    anomaly.consecutive_normalities,
                ),
            }
        )
    return pools


@pytest.mark.parametrize(("raw", "expect"), CASES)
def test_node_pool_defaults(raw: Mapping[str, Any], expect: ref.Expect) -> None:
    """Every pool field resolves as Koordinator v1.8's defaulting leaves it."""
    if expect.wanted == REFUSED:
        with pytest.raises(config.ConfigError, match=r"must not exceed highThresholds\.cpu"):
            lownodeload.Args.from_mapping(raw)
        return
    assert resolved(lownodeload.Args.from_mapping(raw)) == expect.wanted


def test_top_level_zero_counts_take_the_defaults() -> None:
    """v1.8 defaults a top-level consecutiveAbnormalities of 0 to 5 (the file loads unchanged)."""
    args = lownodeload.Args.from_mapping({"anomalyCondition": {"consecutiveAbnormalities": 0}})
    assert args.anomaly_condition.consecutive_abnormalities == 5
    assert args.anomaly_condition.consecutive_normalities == 3


ALL = (CASES,)
