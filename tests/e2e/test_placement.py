"""The placement loop on real nodes (issue 15, test 3), the scenario of testbed.placementloop.

deploy/ installed with an overlay (the agents measure each node as its kubelet's
kubepods cgroup, `--node-usage-source=kubepods`, since the three nodes share one
/proc; short report and descheduling intervals). Busy pods of Deployments make
n1 hot; the descheduler evicts them; the kubelet stops them; the ReplicaSet
controller recreates them; kube-scheduler, asking the extender, binds the
replacements to n2 and n3; n1's next NodeMetric shows it cool; web, under a PDB,
stays on n1.
"""

from __future__ import annotations

import re

import pytest

from testbed import placementloop
from tests.e2e.conftest import RealCluster

pytestmark = [pytest.mark.e2e, pytest.mark.controlplane, pytest.mark.slow]


def test_hot_node_is_drained_onto_cool_nodes_and_cools(
    real_cluster: RealCluster, nodeqos_image: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Evicted from n1 by LowNodeLoad, replaced by the ReplicaSet controller, placed on n2/n3
    by kube-scheduler with the extender; n1's next report is below the high mark; web stays."""
    lines: list[str] = []
    kube = real_cluster.kube
    with placementloop.installed(
        kube,
        real_cluster.plane,
        nodeqos_image,
        tmp_path_factory.mktemp("placement") / "state",
        lines.append,
    ) as extender_ip:
        outcome = placementloop.run(
            kube, real_cluster.plane, extender_ip, lines.append, timeout=240
        )
    story = "\n".join(lines)
    # n1 was hot by the descheduler's own measure, which each eviction's message states
    # (the summary's NodeMetrics percentage is of the Node's allocatable and can sit just
    # under the mark the descheduler judged n1 over)
    over = re.compile(rf"node {placementloop.HOT} is overutilized: cpu usage ([\d.]+)% > high mark")
    for eviction in outcome.evictions:
        found = over.search(eviction["message"])
        assert found and float(found.group(1)) > placementloop.HIGH_CPU, story
    assert placementloop.HOT in outcome.before, story
    assert outcome.evictions, story
    assert all(e["from"] == placementloop.HOT for e in outcome.evictions), story
    busy = {w.name for w in placementloop.WORKLOADS if w.busy}
    assert {e["app"] for e in outcome.evictions} <= busy, story
    # the PDB held: web was refused (it uses the most, so LowNodeLoad tried it) and stayed
    assert any(r["app"] == "web" for r in outcome.refusals), story
    assert outcome.kept and outcome.kept[0].startswith("web-"), story
    # every evicted workload has its replacement Running, and none went back to n1
    assert {p["app"] for p in outcome.placements} >= {e["app"] for e in outcome.evictions}, story
    assert all(p["node"] != placementloop.HOT for p in outcome.placements), story
    # n1's first report averaging only time after the evicted pods were gone
    assert outcome.cooled, story
    assert outcome.after[placementloop.HOT] <= placementloop.HIGH_CPU, story
    print(story)
    print(f"placement loop on real nodes in {outcome.seconds:.0f}s")
