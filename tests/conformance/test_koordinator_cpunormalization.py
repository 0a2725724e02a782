"""Koordinator's CPU normalization of the batch resources, against `manager.noderesource`.

Source: koordinator-sh/koordinator at commit a7a1b76bbf81abd26f9c377de1f31a60dd965f6e:
`apis/extension/cpu_normalization_test.go` `TestGetCPUNormalizationRatio` (which ratio a
node carries; nodeqos maps "no ratio" and "invalid" both to no amplification, as
`PrepareNodeForResource` does with them) and
`pkg/slo-controller/noderesource/plugins/batchresource/plugin_test.go` `TestPrepare`
"update NUMA-level batch resources with cpu-normalization ratio" (the node-level
batch-cpu: 25000 written as 30000 at 1.20; the NUMA zones are not modelled).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kube import objects, slo
from manager.noderesource import ColocationStrategy, allocatable, batch, normalization

NOW = datetime(2026, 1, 1, tzinfo=UTC)
RATIO = normalization.ANNOTATION_CPU_NORMALIZATION_RATIO


@pytest.mark.parametrize(
    ("annotations", "ratio"),
    [
        pytest.param({}, None, id="node has no annotation"),
        pytest.param({"xxx": "yyy"}, None, id="node has no cpu-normalization annotation"),
        pytest.param({RATIO: "invalidValue"}, None, id="node has invalid cpu-normalization ratio format"),
        pytest.param({RATIO: "1.20"}, 1.2, id="node has valid cpu-normalization ratio"),
    ],
)  # fmt: skip
def test_get_cpu_normalization_ratio(annotations: dict[str, str], ratio: float | None) -> None:
    """TestGetCPUNormalizationRatio row: the ratio that amplifies, or none."""
    assert normalization.cpu_normalization_ratio(annotations) == ratio


def test_prepare_amplifies_batch_cpu_by_the_ratio() -> None:
    """TestPrepare row: batch-cpu 25000 on a node with ratio 1.20 is written as 30000;
    batch-memory is not amplified."""
    assert normalization.amplify_cpu(25000, 1.2) == 30000
    node = objects.Node.from_api(
        {
            "metadata": {"name": "test-node", "annotations": {RATIO: "1.20"}},
            "status": {
                "capacity": {"cpu": "100", "memory": "400Gi"},
                "allocatable": {"cpu": "100", "memory": "380Gi"},
            },
        }
    )
    metric = slo.NodeMetric.from_api(
        {
            "metadata": {"name": "test-node"},
            "status": {
                "updateTime": objects.format_time(NOW),
                "nodeMetric": {"nodeUsage": {"resources": {"cpu": "15", "memory": "100Gi"}}},
            },
        }
    )
    strategy = ColocationStrategy(enable=True)
    raw = batch.calculate(strategy, node, [], metric, NOW)
    found = allocatable.calculate(strategy, node, [], metric, NOW)
    assert found.batch.cpu == normalization.amplify_cpu(raw.cpu, 1.2)
    assert found.batch.memory == raw.memory
