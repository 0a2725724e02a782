"""Arbitration as pure decisions: the order of queued jobs, and admit / wait / fail per job."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from descheduler import framework
from descheduler.framework import Handle, Snapshot
from descheduler.plugins import migrationcontroller
from descheduler.plugins.migrationcontroller import arbitration, jobs
from descheduler.plugins.migrationcontroller.arbitration import Action, Candidate
from descheduler.plugins.migrationcontroller.filters import StaticChecks
from descheduler.plugins.migrationcontroller.limits import (
    Caps,
    Migration,
    ObjectLimiters,
    Tally,
    Workload,
)
from descheduler.plugins.migrationcontroller.workloads import Unresolved
from kube import migration, objects, slo
from tests import builders
from tests.descheduler import fakes

NOW = fakes.NOW
EVICT = {"descheduler.alpha.kubernetes.io/evict": "true"}


def args(**raw: Any) -> migrationcontroller.Args:
    return migrationcontroller.Args.from_mapping({"defaultJobMode": "EvictDirectly", **raw})


def checks(**raw: Any) -> StaticChecks:
    snapshot = Snapshot(framework.StaticSource(nodes=fakes.nodes("n1", "n2")).state(), taken_at=NOW)
    handle = Handle(
        evictor=None,  # type: ignore[arg-type]  # the checks never evict
        decisions=None,  # type: ignore[arg-type]
        clock=fakes.FixedClock(),
        snapshot=lambda: snapshot,
    )
    return StaticChecks(args(**raw), handle, lambda name: None)


def job(name: str, created_minutes: int = 0) -> migration.PodMigrationJob:
    return migration.PodMigrationJob(
        metadata=slo.ObjectMeta(name, creation_timestamp=NOW + timedelta(minutes=created_minutes)),
        spec=migration.PodMigrationJobSpec(
            pod_ref=migration.ObjectReference(namespace="d", name=name)
        ),
    )


def candidate(name: str, *, created: int = 0, group: str | None = None, **pod: Any) -> Candidate:
    found = builders.make_pod(name, namespace="d", owner_name=group, **pod)
    ref = found.controller_ref
    workload = None
    if ref is not None:  # ten Ready replicas
        siblings = [
            builders.make_pod(f"{name}-{i}", namespace="d", owner_name=group, **pod)
            for i in range(9)
        ]
        workload = Workload(ref.uid, ref.name, 10, frozenset({ref.uid}), (found, *siblings))
    return Candidate(job(name, created), found, _migration(found), workload)


def _migration(pod: objects.Pod) -> Migration:
    ref = pod.controller_ref
    return Migration(pod.uid, pod.key, pod.namespace, pod.node_name, ref.uid if ref else "")


def names(found: list[Candidate]) -> list[str]:
    return [c.pod.name for c in found]


def test_order_prefers_the_pod_order_then_creation_time() -> None:
    """Lower priority first (LowNodeLoad's order); equal pods go first come, first served."""
    queued = [
        candidate("late", created=2, priority=0, group="a"),
        candidate("high", created=0, priority=100, group="b"),
        candidate("early", created=1, priority=0, group="c"),
    ]
    assert names(arbitration.ordered(queued)) == ["early", "late", "high"]


def test_order_keeps_a_workloads_jobs_together() -> None:
    """Jobs of one workload follow its best-placed job, before other workloads' later ones."""
    queued = [
        candidate("a1", created=0, group="a"),
        candidate("b1", created=1, group="b"),
        candidate("a2", created=2, group="a"),
        candidate("bare", created=3, owner=None),
    ]
    assert names(arbitration.ordered(queued)) == ["a1", "a2", "b1", "bare"]


def judge(
    c: Candidate,
    chosen: StaticChecks | None = None,
    *,
    tally: Tally | None = None,
    caps: Caps | None = None,
    limiters: ObjectLimiters | None = None,
) -> arbitration.Verdict:
    return arbitration.judge(
        c.pod,
        c.migration,
        c.workload,
        checks=chosen or checks(),
        caps=caps or Caps(),
        tally=tally or Tally(),
        limiters=limiters or ObjectLimiters({}, None),
        now=NOW,
    )


def test_judge_admits_a_pod_every_limit_lets_through() -> None:
    assert judge(candidate("p", group="a")).action is Action.ADMIT


@pytest.mark.parametrize(
    ("pod", "raw", "detail"),
    [
        pytest.param({"owner": "DaemonSet"}, {}, "DaemonSet pod", id="daemonset"),
        pytest.param({"local_storage": True}, {}, "local storage", id="local-storage"),
        pytest.param({"pvc": True}, {"ignorePvcPods": True}, "PersistentVolumeClaim", id="pvc"),
        pytest.param({"owner": None}, {}, "bare pod", id="bare-pod"),
        pytest.param({"priority": 2_000_000_000}, {}, "system-critical", id="system-critical"),
        pytest.param(
            {}, {"namespaces": {"exclude": ["d"]}}, "namespace d is excluded", id="namespaces"
        ),
        pytest.param(
            {"annotations": {"scheduling.koordinator.sh/eviction-cost": str(2**31 - 1)}},
            {},
            "never evict",
            id="max-eviction-cost",
        ),
        pytest.param(
            {"labels": {"app": "x"}},
            {"labelSelector": {"matchLabels": {"app": "y"}}},
            "labelSelector",
            id="label-selector",
        ),
    ],
)
def test_judge_fails_what_waiting_cannot_change(
    pod: dict[str, Any], raw: dict[str, Any], detail: str
) -> None:
    """DefaultEvictor's protections (from Koordinator's args), namespaces, the eviction-cost veto."""
    verdict = judge(candidate("p", **pod), checks(**raw))
    assert verdict.action is Action.FAIL and detail in verdict.detail


@pytest.mark.parametrize(
    ("pod", "raw"),
    [
        pytest.param(
            {"local_storage": True}, {"evictLocalStoragePods": True}, id="evictLocalStoragePods"
        ),
        pytest.param(
            {"local_storage": True}, {"skipEvictionGates": ["LocalStorage"]}, id="gate-LocalStorage"
        ),
        pytest.param({"owner": None}, {"evictAllBarePods": True}, id="evictAllBarePods"),
        pytest.param(
            {"owner": None, "phase": "Failed"},
            {"evictFailedBarePods": True},
            id="evictFailedBarePods",
        ),
        pytest.param(
            {},
            {"namespaces": {"exclude": ["d"]}, "skipEvictionGates": ["Namespaces"]},
            id="gate-Namespaces",
        ),
        pytest.param({"local_storage": True, "annotations": EVICT}, {}, id="evict-annotation"),
    ],
)
def test_judge_lets_through_what_args_and_gates_allow(
    pod: dict[str, Any], raw: dict[str, Any]
) -> None:
    assert judge(candidate("p", **pod), checks(**raw)).action is Action.ADMIT


def test_single_replica_fails_unless_annotated_or_skipped() -> None:
    """expectedReplicas 1 is a FAIL; the evict annotation or skipCheckExpectedReplicas lift it."""
    single = candidate("p", group="a")
    single = Candidate(
        single.job,
        single.pod,
        single.migration,
        Workload("w", "ReplicaSet d/a", 1, frozenset(), ()),
    )
    verdict = judge(single, caps=Caps.of(args()))
    assert verdict.action is Action.FAIL and "expects 1 replica(s)" in verdict.detail
    assert (
        judge(single, caps=Caps.of(args(skipCheckExpectedReplicas=True))).action is not Action.FAIL
    )
    annotated = Candidate(
        single.job,
        builders.make_pod("p", namespace="d", owner_name="a", annotations=EVICT),
        single.migration,
        single.workload,
    )
    assert judge(annotated, caps=Caps.of(args())).action is not Action.FAIL


def test_judge_waits_for_limits_tokens_and_unknown_owners() -> None:
    c = candidate("p", group="a")
    busy = Tally([Migration("other", "d/other", "d", c.pod.node_name, "", True)])
    verdict = judge(c, tally=busy, caps=Caps(per_node=1))
    assert verdict.action is Action.WAIT and "maxMigratingPerNode 1" in verdict.detail
    unknown = Candidate(c.job, c.pod, c.migration, Unresolved("its controller is not known (yet)"))
    assert judge(unknown).action is Action.WAIT
    limiters = ObjectLimiters(args().object_limiters, None)
    [key] = limiters.keys(c.migration, c.workload if isinstance(c.workload, Workload) else None)
    limiters.take([key], NOW)
    verdict = judge(c, limiters=limiters)
    assert verdict.action is Action.WAIT and verdict.retry_in == timedelta(seconds=150)


def test_condition_updates_follow_koordinator() -> None:
    """A condition mirrors into status/reason/message; its transition time moves with its status."""
    status = migration.PodMigrationJobStatus(phase=jobs.Phase.RUNNING)
    evicting = migration.Condition(type="Eviction", status="False", reason="Evicting", message="m")
    first, changed = jobs.with_condition(status, evicting, NOW)
    assert changed and (first.status, first.reason, first.message) == ("Eviction", "Evicting", "m")
    again, changed = jobs.with_condition(first, evicting, NOW + timedelta(minutes=1))
    assert not changed and again == first
    failed = migration.Condition(type="Eviction", status="False", reason="FailedEvict", message="x")
    later, _ = jobs.with_condition(first, failed, NOW + timedelta(minutes=1))
    assert later.conditions[0].last_transition_time == NOW  # status unchanged: False
    done = migration.Condition(type="Eviction", status="True", reason="EvictComplete")
    final, _ = jobs.with_condition(later, done, NOW + timedelta(minutes=2))
    assert final.conditions[0].last_transition_time == NOW + timedelta(minutes=2)


def test_job_times() -> None:
    """TTL deadline, another instance's presumed life, and the scavenger's retention."""
    with_ttl = migration.PodMigrationJob(
        metadata=slo.ObjectMeta("j", creation_timestamp=NOW),
        spec=migration.PodMigrationJobSpec(
            pod_ref=migration.ObjectReference(name="p"), ttl=timedelta(minutes=5)
        ),
    )
    assert (
        jobs.deadline(with_ttl) == jobs.presumed_alive_until(with_ttl) == NOW + timedelta(minutes=5)
    )
    assert jobs.scavenge_after(with_ttl) == NOW + timedelta(minutes=10)
    no_ttl = job("k")
    assert jobs.deadline(no_ttl) is None
    assert (
        jobs.scavenge_after(no_ttl)
        == jobs.presumed_alive_until(no_ttl)
        == NOW + timedelta(minutes=30)
    )
    assert jobs.eviction_trigger_and_reason(no_ttl) == ("", "NotSet")
    assert jobs.phase(no_ttl) is jobs.Phase.PENDING and jobs.created_by(no_ttl) is None
