"""The PodMigrationJob lifecycle against the real control plane.

A cycle's eviction becomes a Pending job carrying Koordinator's annotations;
the controller (the framework's `run(stop)` form) admits it, evicts the pod and
marks the job Succeeded once the pod is gone, with Events on job and pod. Jobs
run out their TTL, the scavenger deletes old ones, another instance's jobs are
left alone, SoftEviction only annotates, and no dry run creates a job.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from descheduler.framework import Reason
from kube import rest
from testbed import localcluster
from tests.descheduler.test_migration_harness import (
    Clock,
    Cluster,
    Descheduler,
    build,
)
from tests.waiting import eventually

pytestmark = pytest.mark.controlplane

NO_RATE_LIMIT = {"objectLimiters": {"workload": {"duration": "0s"}}}
ROOMY = {**NO_RATE_LIMIT, "maxMigratingPerWorkload": 3, "maxUnavailablePerWorkload": 3}


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


def _job_of(cluster: Cluster, pod: str) -> dict[str, Any]:
    [job] = [j for j in cluster.jobs() if j["spec"]["podRef"]["name"] == pod]
    return job


def test_an_eviction_becomes_a_job_the_controller_carries_out(
    cluster: Cluster, started: list[Descheduler]
) -> None:
    """Evict → Pending job → Running (pod evicted, Events) → Succeeded once the pod is gone."""
    cluster.workload("web", 6, {"a": 3, "b": 3})
    d = build(
        cluster.kube,
        cluster.namespace,
        {**ROOMY, "maxMigratingPerNode": 2, "defaultDeleteOptions": {"gracePeriodSeconds": 7}},
        balance=["EvictEverything"],
    )
    started.append(d.start())
    ns = cluster.namespace
    report = d.runner.run_once()
    # node a: two jobs queue, the third pod waits for a slot; then node b up to the workload cap
    assert report.evicted_pods == [f"{ns}/web-0", f"{ns}/web-1", f"{ns}/web-3"]
    assert [(s.pod, s.reason_code) for s in report.skipped] == [
        (f"{ns}/web-2", Reason.LIMIT_REACHED),
        (f"{ns}/web-4", Reason.LIMIT_REACHED),
        (f"{ns}/web-5", Reason.LIMIT_REACHED),
    ]
    assert "maxMigratingPerNode 2 reached on node" in report.skipped[0].detail
    job = _job_of(cluster, "web-0")
    annotations = job["metadata"]["annotations"]
    assert annotations["koordinator.sh/evict-trigger"] == "EvictEverything"
    assert annotations["koordinator.sh/evict-reason"] == f"{cluster.node('a')} is hot"
    assert annotations["koordinator.sh/job-created-by"] == d.plugin.instance
    assert job["spec"]["mode"] == "EvictDirectly" and job["spec"]["ttl"] == "5m0s"
    assert job["spec"]["deleteOptions"] == {"gracePeriodSeconds": 7}
    assert job["spec"]["podRef"]["uid"] == cluster.pod("web-0")["metadata"]["uid"]  # type: ignore[index]

    eventually(lambda: cluster.count("Running") == 3, "three jobs running")
    eventually(
        lambda: all(
            cluster.pod(p)["metadata"].get("deletionTimestamp") for p in ("web-0", "web-1", "web-3")
        ),  # type: ignore[index]
        "the pods evicted",
    )
    assert cluster.pod("web-0")["metadata"]["deletionGracePeriodSeconds"] == 7  # type: ignore[index]
    assert ("POST", f"/api/v1/namespaces/{ns}/pods/web-0/eviction") in d.client.writes
    name = job["metadata"]["name"]
    running = _job_of(cluster, "web-0")["status"]
    [condition] = running["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "Eviction",
        "False",
        "Evicting",
    )
    assert running["status"] == "Eviction" and running["reason"] == "Evicting"
    eventually(lambda: ("Normal", "Evicting") in [e[:2] for e in cluster.job_events(name)], "Event")
    pod_events = [e for e in cluster.events() if e["involvedObject"]["name"] == "web-0"]
    assert [e["reason"] for e in pod_events] == ["Descheduled"]
    assert "EvictEverything" in pod_events[0]["message"] and name in pod_events[0]["message"]

    # the kubelet finishes the evictions: the jobs succeed
    cluster.finish_terminating()
    eventually(lambda: cluster.count("Succeeded") == 3, "three jobs succeeded")
    done = _job_of(cluster, "web-0")["status"]
    assert (done["phase"], done["status"], done.get("reason")) == ("Succeeded", "Complete", None)
    assert done["message"] == f'Pod "{cluster.namespace}/web-0" has been evicted'
    [condition] = done["conditions"]
    assert (condition["status"], condition["reason"]) == ("True", "EvictComplete")
    eventually(
        lambda: ("Normal", "EvictComplete") in [e[:2] for e in cluster.job_events(name)], "Event"
    )

    # until the ReplicaSet has its replicas back, the workload has none to spare
    blocked = d.runner.run_once()
    assert blocked.evicted_pods == []
    assert "maxUnavailablePerWorkload 3 reached" in blocked.skipped[0].detail
    replacements = cluster.replenish("web", "b")
    eventually(
        lambda: (
            {p.name for p in d.source.state().pods} >= set(replacements)
            and len(d.plugin.caches.pods_of_owner(cluster.replica_sets["web"])) == 6
        ),  # type: ignore[union-attr]
        "the caches to see the replacements",
    )
    second = d.runner.run_once()
    assert f"{ns}/web-2" in second.evicted_pods


def test_a_single_replica_workload_fails_at_once(
    cluster: Cluster, started: list[Descheduler]
) -> None:
    """A job for the only replica fails with ForbiddenMigratePod at once, not at its TTL."""
    cluster.workload("solo", 1, {"a": 1})
    d = build(cluster.kube, cluster.namespace, NO_RATE_LIMIT)
    started.append(d.start())
    name = cluster.job("solo-0", ttl="1h")
    eventually(lambda: cluster.phases() == {"solo-0": "Failed"}, "the job failed", timeout=30)
    status = _job_of(cluster, "solo-0")["status"]
    assert status["reason"] == "ForbiddenMigratePod"
    assert "expects 1 replica(s)" in status["message"]
    eventually(lambda: bool(cluster.job_events(name)), "the job's Event")
    assert cluster.job_events(name)[0][:2] == ("Warning", "ForbiddenMigratePod")
    assert not cluster.pod("solo-0")["metadata"].get("deletionTimestamp")  # type: ignore[index]
    # the filter refuses the pod too: no job is ever queued for it
    report = build(cluster.kube, cluster.namespace, NO_RATE_LIMIT, balance=["EvictEverything"])
    started.append(report.start())
    cycle = report.runner.run_once()
    assert cycle.evicted_pods == []
    assert "expects 1 replica(s)" in cycle.skipped[0].detail


def test_ttl_expiry_fails_running_and_waiting_jobs_and_old_jobs_are_scavenged(
    cluster: Cluster, started: list[Descheduler]
) -> None:
    """A PDB keeps one job evicting, a second waits for its node slot; past the TTL both time out."""
    cluster.workload("web", 4, {"a": 4})
    cluster.kube.create(
        f"/apis/policy/v1/namespaces/{cluster.namespace}/poddisruptionbudgets",
        {
            "metadata": {"name": "web"},
            "spec": {"minAvailable": 4, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    localcluster.sync_pdb_status(cluster.kube, cluster.namespace, "web")
    clock = Clock()
    d = build(
        cluster.kube, cluster.namespace, {**NO_RATE_LIMIT, "maxMigratingPerNode": 1}, clock=clock
    )
    started.append(d.start())
    first = cluster.job("web-0", ttl="5m")
    eventually(lambda: cluster.phases().get("web-0") == "Running", "the first job admitted")
    second = cluster.job("web-1", ttl="5m")
    eventually(
        lambda: (_job_of(cluster, "web-0").get("status") or {}).get("reason") == "FailedEvict",
        "the eviction refused by the PDB",
    )
    assert "pdb_blocked" in _job_of(cluster, "web-0")["status"]["message"]
    eventually(lambda: cluster.phases() == {"web-0": "Running", "web-1": "Pending"}, "one waits")
    waiting = _job_of(cluster, "web-1")["status"]["message"]
    assert waiting == (
        f"waiting for arbitration: maxMigratingPerNode 1 reached on node {cluster.node('a')} "
        "(1 migrating)"
    )
    clock.advance(minutes=5, seconds=1)
    d.plugin.wake()
    eventually(lambda: cluster.phases() == {"web-0": "Failed", "web-1": "Failed"}, "both timed out")
    for pod, job in (("web-0", first), ("web-1", second)):
        status = _job_of(cluster, pod)["status"]
        assert (status["reason"], status["message"]) == ("Timeout", "Abort job caused by timeout")
        eventually(
            lambda job=job: ("Warning", "Timeout") in [e[:2] for e in cluster.job_events(job)],
            "Event",
        )
    # TTL + 5 minutes after creation the scavenger deletes them (it runs once a minute)
    clock.advance(minutes=5)
    d.plugin.controller._scavenged_at = None  # type: ignore[union-attr]  # due now
    d.plugin.wake()
    eventually(lambda: cluster.jobs() == [], "the jobs scavenged")


def test_jobs_of_another_instance_are_left_alone(
    cluster: Cluster, started: list[Descheduler]
) -> None:
    """A job created by another controller instance keeps its status; its pod is not queued again."""
    cluster.workload("web", 4, {"a": 4})
    d = build(cluster.kube, cluster.namespace, NO_RATE_LIMIT, balance=["EvictEverything"])
    started.append(d.start())
    name = cluster.job("web-0", created_by="another-instance")
    eventually(
        lambda: (
            d.plugin.caches is not None
            and any(j.metadata.name == name for j in d.plugin.caches.jobs())
        ),
        "the job in the cache",
    )
    report = d.runner.run_once()
    # its job counts as in flight: with it, node a has room for one more (maxMigratingPerNode 2)
    assert report.evicted_pods == [f"{cluster.namespace}/web-1"]
    [skip] = [s for s in report.skipped if s.pod.endswith("/web-0")]
    assert skip.reason_code is Reason.FILTERED and name in skip.detail
    eventually(lambda: cluster.count("Running") == 1, "our own job admitted")
    assert cluster.phases()["web-0"] == ""
    assert "status" not in _job_of(cluster, "web-0") or not _job_of(cluster, "web-0")["status"]
    assert cluster.job_events(name) == []


def test_soft_eviction_writes_the_annotation_and_evicts_nothing(
    cluster: Cluster, started: list[Descheduler]
) -> None:
    """SoftEviction: the pod gets Koordinator's soft-eviction annotation and stays; the job waits."""
    cluster.workload("web", 4, {"a": 4})
    d = build(
        cluster.kube,
        cluster.namespace,
        {**NO_RATE_LIMIT, "evictionPolicy": "SoftEviction"},
        balance=["EvictEverything"],
    )
    started.append(d.start())
    report = d.runner.run_once()
    assert report.evicted_pods[:1] == [f"{cluster.namespace}/web-0"]
    eventually(
        lambda: (
            "scheduling.koordinator.sh/soft-eviction"
            in (cluster.pod("web-0")["metadata"].get("annotations") or {})
        ),  # type: ignore[index]
        "the soft-eviction annotation",
    )
    pod = cluster.pod("web-0")
    assert pod is not None and not pod["metadata"].get("deletionTimestamp")
    spec = json.loads(pod["metadata"]["annotations"]["scheduling.koordinator.sh/soft-eviction"])
    assert spec["initiator"] == "EvictEverything"
    assert spec["reason"] == f"{cluster.node('a')} is hot"
    assert "timestamp" in spec

    # the controller patches the pod, then the job's status: on a busy machine the
    # status can land well after the annotation, so it is waited for, not read once
    def job_phase() -> tuple[Any, Any]:
        status = _job_of(cluster, "web-0").get("status") or {}
        return status.get("phase"), status.get("reason")

    eventually(lambda: job_phase() == ("Running", "Evicting"), "the job Running, Evicting")
    assert not any(
        path.endswith("/eviction") or (method == "DELETE" and "/pods/" in path)
        for method, path in d.client.writes
    )


@pytest.mark.parametrize(
    ("top", "args"),
    [
        pytest.param({"dry_run": True}, {}, id="framework-dryRun"),
        pytest.param({}, {"dryRun": True}, id="MigrationController-dryRun"),
    ],
)
def test_dry_run_creates_no_job(
    cluster: Cluster, started: list[Descheduler], top: dict[str, bool], args: dict[str, bool]
) -> None:
    """Either dry run decides (pods listed as evicted) and creates no PodMigrationJob."""
    cluster.workload("web", 4, {"a": 4})
    d = build(
        cluster.kube,
        cluster.namespace,
        {**NO_RATE_LIMIT, **args},
        balance=["EvictEverything"],
        **top,
    )
    started.append(d.start())
    report = d.runner.run_once()
    ns = cluster.namespace
    assert report.evicted_pods == [f"{ns}/web-0", f"{ns}/web-1"]  # 4 replicas: maxUnavailable 2
    assert cluster.jobs() == []
    assert not [w for w in d.client.writes if "podmigrationjobs" in w[1]]
    if top:
        assert d.client.writes == []  # the framework's dry run writes nothing at all


def test_the_delete_policy_deletes_and_the_label_overrides_it(
    cluster: Cluster, started: list[Descheduler]
) -> None:
    """evictionPolicy Delete deletes the pod; a pod labelled evict-policy=Eviction is evicted."""
    cluster.replica_set("web", 4)
    cluster.run_pod("web-0", "a", "web")
    cluster.run_pod("web-1", "a", "web", labels={"koordinator.sh/evict-policy": "Eviction"})
    cluster.run_pod("web-2", "b", "web")
    cluster.run_pod("web-3", "b", "web")
    d = build(cluster.kube, cluster.namespace, {**NO_RATE_LIMIT, "evictionPolicy": "Delete"})
    started.append(d.start())
    cluster.job("web-0")
    cluster.job("web-1")
    eventually(lambda: cluster.count("Running") == 2, "both admitted")
    ns = cluster.namespace
    eventually(
        lambda: (
            ("DELETE", f"/api/v1/namespaces/{ns}/pods/web-0") in d.client.writes
            and ("POST", f"/api/v1/namespaces/{ns}/pods/web-1/eviction") in d.client.writes
        ),
        "one deletion, one eviction",
    )
