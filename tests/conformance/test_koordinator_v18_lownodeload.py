"""Koordinator v1.8 LowNodeLoad: a pool without target nodes evicts nothing.

Source: koordinator-sh/koordinator
`pkg/descheduler/framework/plugins/loadaware/utilization_util_test.go` at v1.8.0
(commit 989ca85c62abcca92b303aa12fd2ccff2ed30fed), TestBalancePodsSkipsWhenNoTargetNodes.
Upstream calls `balancePods` with a hot source node and no target nodes and
checks that no pod is even considered. Here the same source (4000m, one
1000m ReplicaSet pod, load 2500m against a 50% high mark) runs one cycle
beside a node that is neither low nor high (37.5% against 20/50 marks), so
the pool has no target; the settings are the plugin table's
(`test_koordinator_lownodeload.run_row`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from kube import objects
from tests.conformance import reference as ref
from tests.conformance.reference import node, pod, rs_owner, same
from tests.conformance.test_koordinator_lownodeload import run_row

TITLE = "Koordinator v1.8 LowNodeLoad"
FILE = "koordinator pkg/descheduler/framework/plugins/loadaware/utilization_util_test.go"
COMMIT = "989ca85c62abcca92b303aa12fd2ccff2ed30fed"  # v1.8.0

CASES = [
    pytest.param(
        {"low": {"cpu": 20}, "high": {"cpu": 50}},
        [node("source-node", 4000, 3000, 10), node("middle-node", 4000, 3000, 10)],
        [
            pod("test-pod", 1000, 0, "source-node", rs_owner),
            pod("other-1", 1500, 0, "source-node", rs_owner),
            pod("middle-1", 1500, 0, "middle-node", rs_owner),
        ],
        same([]),
        id="TestBalancePodsSkipsWhenNoTargetNodes",
    ),
]


@pytest.mark.parametrize(("row", "nodes", "pods", "expect"), CASES)
def test_no_target_nodes(
    row: Mapping[str, Any],
    nodes: Sequence[objects.Node],
    pods: Sequence[objects.Pod],
    expect: ref.Expect,
) -> None:
    """A hot node whose pool has no low node keeps every pod."""
    assert run_row(row, nodes, pods) == expect.wanted


def test_the_same_pool_with_a_low_node_moves_a_pod() -> None:
    """The control: with the middle node made low (10%), the source gives up a pod."""
    nodes = [node("source-node", 4000, 3000, 10), node("low-node", 4000, 3000, 10)]
    pods = [
        pod("test-pod", 1000, 0, "source-node", rs_owner),
        pod("other-1", 1500, 0, "source-node", rs_owner),
        pod("low-1", 400, 0, "low-node", rs_owner),
    ]
    assert len(run_row({"low": {"cpu": 20}, "high": {"cpu": 50}}, nodes, pods)) == 1


ALL = (CASES,)
