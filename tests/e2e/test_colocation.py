"""Colocation on real nodes (issue 25), the scenario of testbed.colocationloop.

deploy/ installed with colocation on (short report, update and degrade intervals),
BE CPU suppression on, and a ClusterColocationProfile. Idle online Deployments
leave slack that nodeqos-manager publishes as batch-cpu; a Job asking plain cpu is
turned Batch by the profile (the API server's MutatingAdmissionPolicy where served,
1.36+, else nodeqos-manager's webhook: the same pod either way) and placed only where
Batch capacity is; online load on n1 shrinks its batch-cpu, BE suppression cuts
the BE pods' usage and the online pods are not throttled; n2's agent stopped past
degradeTimeMinutes sends its Batch resources to zero with an Event.
"""

from __future__ import annotations

import pytest

from testbed import colocationloop
from tests.e2e.conftest import RealCluster

pytestmark = [pytest.mark.e2e, pytest.mark.controlplane, pytest.mark.slow]


def test_slack_becomes_batch_capacity_and_the_node_keeps_it_safe(
    real_cluster: RealCluster, nodeqos_image: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Each of the four steps: capacity published, placement on it, pressure, degradation."""
    lines: list[str] = []
    kube = real_cluster.kube

    def say(text: str) -> None:
        lines.append(text)
        print(text, flush=True)

    with colocationloop.installed(
        kube,
        real_cluster.plane,
        nodeqos_image,
        tmp_path_factory.mktemp("colocation") / "state",
        say,
    ):
        outcome = colocationloop.run(kube, say)
    colocationloop.summarize(outcome, say)
    story = "\n".join(lines)
    small, pressed = colocationloop.SMALL, colocationloop.PRESSED
    # 1. slack published: room for batch pods where not capped, too little on the small node
    assert all(
        outcome.batch_cpu[n] >= 2 * colocationloop.BATCH_REQUEST_MILLIS
        for n in colocationloop.NODES
        if n != small
    ), story
    assert outcome.batch_cpu[small] < colocationloop.BATCH_REQUEST_MILLIS, story
    # 2. the profile made the pods Batch; kube-scheduler kept them off the small node
    assert colocationloop.BATCH_CPU in outcome.batch_requests, story
    assert "cpu" not in outcome.batch_requests, story
    assert outcome.batch_pods[small] == 0, story
    # the same pod on every minor, whichever path applied the profile
    assert outcome.batch_pod == colocationloop.EXPECTED_BATCH_POD, story
    assert outcome.profile_path, story
    assert sum(outcome.batch_pods.values()) == colocationloop.BATCH_PODS, story
    assert outcome.cluster_cpu_before is not None and outcome.cluster_cpu_after is not None
    assert outcome.cluster_cpu_after > outcome.cluster_cpu_before, story
    # the web server on n1 answered at its constant rate alone and beside the batch pods
    for sample in (outcome.server_alone, outcome.server_with_batch):
        assert sample is not None, story
        assert sample.requests >= 0.9 * colocationloop.SERVER_RATE * colocationloop.SERVER_SECONDS
        assert sample.errors <= sample.requests // 10 and sample.p99_ms > 0, story
    assert outcome.batch_pods[colocationloop.SERVER_NODE] > 0, story
    # 3. online load: batch-cpu shrinks, BE usage drops under suppression, online not throttled
    assert outcome.pressed_batch_after is not None and outcome.pressed_batch_before is not None
    shrink = outcome.pressed_batch_before - outcome.pressed_batch_after
    # beyond the burst's request: the reported usage, not the new pod's request, did it
    assert shrink > colocationloop.SHRINK_MILLIS, story
    assert outcome.be_usage_after is not None and outcome.be_usage_before is not None
    assert outcome.be_usage_after < outcome.be_usage_before, story
    assert outcome.be_quota_after is not None and outcome.be_quota_after > 0, story
    assert outcome.online_throttled_after == outcome.online_throttled_before, story
    assert pressed != small
    # 4. the stopped agent's node degraded to zero, with the Event
    assert outcome.stopped_batch_before not in (None, (0, 0)), story
    assert outcome.stopped_batch_after == (0, 0), story
    assert colocationloop.DEGRADED_REASON in outcome.degrade_event, story
