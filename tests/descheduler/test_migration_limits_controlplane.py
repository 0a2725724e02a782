"""Arbitration against the real control plane: exactly as many jobs run as the limits allow.

Jobs are written by hand (a user's `kubectl create`, or any other plugin's
queue) so that more are queued than may run; the controller admits (phase
Running, pod evicted) exactly what every limit lets through and leaves the rest
Pending. Evicted pods stay Terminating until the test plays the kubelet, so the
admitted count is stable to look at.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kube import rest
from tests.descheduler.test_migration_harness import (
    Clock,
    Cluster,
    Descheduler,
    build,
)
from tests.waiting import eventually

pytestmark = pytest.mark.controlplane

# 12 replicas: 10 on node a; no workload limit binds unless a case sets one.
BASE: dict[str, Any] = {
    "objectLimiters": {"workload": {"duration": "0s"}},
    "maxMigratingPerNode": 0,
    "maxMigratingPerWorkload": 10,
    "maxUnavailablePerWorkload": 10,
}


@pytest.fixture
def cluster(kube: rest.Rest, namespace: str) -> Iterator[Cluster]:
    made = Cluster(kube, namespace)
    made.add_node("a")
    made.add_node("b")
    yield made
    made.cleanup()


@pytest.fixture
def started() -> Iterator[list[Descheduler]]:
    running: list[Descheduler] = []
    yield running
    for d in running:
        d.shut()


def settle(cluster: Cluster, d: Descheduler, admitted: int, queued: int) -> None:
    """Wait until `admitted` jobs run with their pods evicted; three passes later, still so."""
    controller = d.plugin.controller
    assert controller is not None

    def evicted() -> bool:
        running = [p for p, phase in cluster.phases().items() if phase == "Running"]
        return len(running) == admitted and all(
            (cluster.pod(p) or {}).get("metadata", {}).get("deletionTimestamp") for p in running
        )

    eventually(evicted, f"{admitted} jobs admitted and their pods evicted")
    seen = controller.passes
    for _ in range(3):
        d.plugin.wake()
        eventually(lambda seen=seen: controller.passes > seen, "another pass")
        seen = controller.passes
    assert cluster.count("Running") == admitted
    assert cluster.count("") + cluster.count("Pending") == queued


@pytest.mark.parametrize(
    ("limit", "admitted"),
    [
        pytest.param({"maxMigratingPerNode": 2}, 2, id="maxMigratingPerNode"),
        pytest.param({"maxMigratingPerNamespace": 3}, 3, id="maxMigratingPerNamespace"),
        pytest.param({"maxMigratingPerWorkload": 4}, 4, id="maxMigratingPerWorkload"),
        pytest.param({"maxUnavailablePerWorkload": "25%"}, 3, id="maxUnavailablePerWorkload"),
        pytest.param({"maxMigratingGlobally": 1}, 1, id="maxMigratingGlobally"),
    ],
)
def test_each_limit_admits_exactly_its_count(
    cluster: Cluster, started: list[Descheduler], limit: dict[str, Any], admitted: int
) -> None:
    """Six jobs queued for pods on one node: the limit alone decides how many run."""
    pods = cluster.workload("web", 12, {"a": 10, "b": 2})
    d = build(cluster.kube, cluster.namespace, {**BASE, **limit})
    started.append(d.start())
    for pod in pods[:6]:
        cluster.job(pod)
    settle(cluster, d, admitted, 6 - admitted)


@pytest.mark.parametrize(
    ("not_ready", "admitted"),
    [pytest.param(False, 2, id="all-ready"), pytest.param(True, 1, id="one-not-ready")],
)
def test_max_unavailable_counts_a_not_ready_replica(
    cluster: Cluster, started: list[Descheduler], not_ready: bool, admitted: int
) -> None:
    """4 replicas (maxUnavailable 2 by default): a not-Ready replica leaves room for one."""
    cluster.replica_set("web", 4)
    for i in range(4):
        cluster.run_pod(f"web-{i}", "a", "web", ready=not (not_ready and i == 3))
    d = build(cluster.kube, cluster.namespace, {"objectLimiters": {"workload": {"duration": "0s"}}})
    started.append(d.start())
    for i in range(3):
        cluster.job(f"web-{i}")
    settle(cluster, d, admitted, 3 - admitted)


def test_ten_queued_jobs_on_one_node_all_complete(
    cluster: Cluster, started: list[Descheduler]
) -> None:
    """maxMigratingPerNode 2 with ten jobs queued on a node: two at a time, all ten succeed."""
    pods = cluster.workload("web", 20, {"a": 10, "b": 10})
    d = build(
        cluster.kube,
        cluster.namespace,
        {**BASE, "maxMigratingPerNode": 2, "maxUnavailablePerWorkload": 2},
    )
    started.append(d.start())
    for pod in pods[:10]:
        cluster.job(pod)
    most = 0
    for _ in range(5):  # two at a time: five rounds
        before = cluster.count("Succeeded")
        if before == 10:
            break
        settle(cluster, d, 2, 8 - before)
        most = max(most, cluster.count("Running"))
        # the kubelet finishes the evictions, the ReplicaSet controller replaces the pods
        assert len(cluster.finish_terminating()) == 2
        cluster.replenish("web", "b")
        eventually(lambda before=before: cluster.count("Succeeded") == before + 2, "two succeed")
    assert most == 2
    assert set(cluster.phases().values()) == {"Succeeded"}


def test_the_workload_object_limiter_counts_at_admission(
    cluster: Cluster, started: list[Descheduler]
) -> None:
    """objectLimiters.workload (2 per 10m, burst 2): two run, the third waits for a token."""
    pods = cluster.workload("web", 12, {"a": 10, "b": 2})
    clock = Clock()
    limiter = {"workload": {"duration": "10m", "maxMigrating": 2, "burst": 2}}
    d = build(cluster.kube, cluster.namespace, {**BASE, "objectLimiters": limiter}, clock=clock)
    started.append(d.start())
    for pod in pods[:3]:
        cluster.job(pod, ttl="1h")
    settle(cluster, d, 2, 1)
    # the two evictions complete at once: Koordinator took its tokens only now, too late
    cluster.finish_terminating()
    eventually(lambda: cluster.count("Succeeded") == 2, "two succeeded")
    settle(cluster, d, 0, 1)
    clock.advance(minutes=5)  # 2 tokens per 10 minutes: one is back
    d.plugin.wake()
    eventually(lambda: cluster.count("Running") == 1, "the third admitted")
