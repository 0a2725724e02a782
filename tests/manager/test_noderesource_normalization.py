"""manager.noderesource.normalization: the CPU normalization ratio and amplified allocatable."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from kube import objects
from manager.noderesource import ColocationStrategy, allocatable, batch, normalization
from tests.builders import make_node, make_nodemetric

NOW = datetime(2026, 1, 1, tzinfo=UTC)
GI = 2**30
RATIO = normalization.ANNOTATION_CPU_NORMALIZATION_RATIO


@pytest.mark.parametrize(
    ("raw", "ratio"),
    [
        pytest.param("1.50", 1.5, id="above-one"),
        pytest.param("1.00", None, id="one-does-not-amplify"),
        pytest.param("0.80", None, id="below-one-is-skipped"),
        pytest.param("-2", None, id="negative"),
        pytest.param("nan", None, id="nan"),
        pytest.param("", None, id="empty"),
    ],
)
def test_only_a_ratio_above_one_amplifies(raw: str, ratio: float | None) -> None:
    """Koordinator's PrepareNodeForResource amplifies only for a parsed ratio > 1."""
    assert normalization.cpu_normalization_ratio({RATIO: raw}) == ratio


def test_amplified_cpu_rounds_up_to_a_whole_millicore() -> None:
    """1001 millicores x 1.33 = 1331.33: written as 1332, as Koordinator rounds the quantity up."""
    assert normalization.amplify_cpu(1001, 1.33) == 1332
    assert normalization.amplify_cpu(1001, None) == 1001


def test_batch_and_mid_cpu_are_amplified_memory_is_not() -> None:
    """On a node with ratio 1.5 both batch-cpu and mid-cpu are written x1.5; memories unchanged."""
    plain = make_node("n1", cpu="8", memory="16Gi")
    fast = make_node("n1", cpu="8", memory="16Gi", annotations={RATIO: "1.50"})
    metric = make_nodemetric("n1", system_cpu=1000, node_memory=2 * GI, update_time=NOW)
    strategy = ColocationStrategy(enable=True, mid_unallocated_percent=50)
    base = allocatable.calculate(strategy, plain, [], metric, NOW)
    found = allocatable.calculate(strategy, fast, [], metric, NOW)
    assert base.batch.cpu > 0 and base.mid.cpu > 0
    assert found.batch.cpu == base.batch.cpu * 3 // 2
    assert found.mid.cpu == base.mid.cpu * 3 // 2
    assert (found.batch.memory, found.mid.memory) == (base.batch.memory, base.mid.memory)


def _amplified_node(annotations: dict[str, str]) -> objects.Node:
    """8 cores, 16Gi; the kubelet keeps 1 core and 1Gi; allocatable.cpu amplified x1.5 to 10.5."""
    return objects.Node.from_api(
        {
            "metadata": {"name": "n1", "annotations": annotations},
            "status": {
                "capacity": {"cpu": "8", "memory": "16Gi"},
                "allocatable": {"cpu": "10500m", "memory": "15Gi"},
            },
        }
    )


def test_reservation_reads_the_raw_allocatable_of_an_amplified_node() -> None:
    """An amplified allocatable.cpu above capacity does not erase the kubelet's 1-core
    reservation: it is taken from raw-allocatable while the amplification ratio is set."""
    raw = {normalization.ANNOTATION_RAW_ALLOCATABLE: json.dumps({"cpu": "7", "memory": "15Gi"})}
    ratio = {normalization.ANNOTATION_AMPLIFICATION_RATIO: json.dumps({"cpu": 1.5})}
    assert batch.reservation(_amplified_node({**raw, **ratio})) == {"cpu": 1000, "memory": GI}
    # without the ratio annotation the raw allocatable is stale (Koordinator's webhook drops it)
    assert batch.reservation(_amplified_node(raw)) == {"cpu": 0, "memory": GI}
    assert batch.reservation(_amplified_node({})) == {"cpu": 0, "memory": GI}
