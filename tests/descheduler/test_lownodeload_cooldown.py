"""LowNodeLoad per-workload cool-down with an injected clock."""

from __future__ import annotations

from datetime import timedelta

from descheduler.plugins.lownodeload.cooldown import DEFAULT_PERIOD, CoolDown
from tests.builders import T0, make_pod


def test_default_period() -> None:
    """The default cool-down is five minutes."""
    assert timedelta(minutes=5) == DEFAULT_PERIOD


def test_siblings_wait_for_the_period() -> None:
    """A pod of the same controller is blocked until the period after the eviction."""
    cool_down = CoolDown()
    web_a = make_pod("web-a", owner_name="web")
    web_b = make_pod("web-b", owner_name="web")
    cool_down.record(web_a, T0)
    assert (
        cool_down.blocked_until(web_b, T0 + timedelta(minutes=4, seconds=59)) == T0 + DEFAULT_PERIOD
    )
    assert cool_down.blocked_until(web_b, T0 + DEFAULT_PERIOD) is None
    assert cool_down.tracked == 0  # an ended cool-down is dropped when seen


def test_other_workloads_are_not_blocked() -> None:
    """Only the same controller uid is cooled."""
    cool_down = CoolDown()
    cool_down.record(make_pod("web-a", owner_name="web"), T0)
    assert cool_down.blocked_until(make_pod("db-a", owner_name="db"), T0) is None


def test_pods_without_controller_are_never_cooled() -> None:
    """A bare pod has no workload to protect."""
    cool_down = CoolDown()
    bare = make_pod("bare", owner=None)
    cool_down.record(bare, T0)
    assert cool_down.blocked_until(bare, T0) is None
    assert cool_down.tracked == 0


def test_owner_without_controller_flag_is_still_a_workload() -> None:
    """Siblings sharing a non-controller owner reference cool down together."""
    cool_down = CoolDown()
    web_a = make_pod("web-a", owner_name="web", owner_controller=False)
    cool_down.record(web_a, T0)
    web_b = make_pod("web-b", owner_name="web", owner_controller=False)
    assert cool_down.blocked_until(web_b, T0) == T0 + DEFAULT_PERIOD


def test_replica_sets_of_one_deployment_are_one_workload() -> None:
    """During a rollout the old and new ReplicaSet of a Deployment cool down together."""
    cool_down = CoolDown()
    old = make_pod("web-old", owner_name="web-5d4f8", labels={"pod-template-hash": "5d4f8"})
    new = make_pod("web-new", owner_name="web-7c9b2", labels={"pod-template-hash": "7c9b2"})
    other = make_pod("api-1", owner_name="api-7c9b2", labels={"pod-template-hash": "7c9b2"})
    cool_down.record(old, T0)
    assert cool_down.blocked_until(new, T0) == T0 + DEFAULT_PERIOD
    assert cool_down.blocked_until(other, T0) is None
    plain_rs = make_pod("batch-1", owner_name="batch")  # no hash label: the ReplicaSet itself
    assert CoolDown.key(plain_rs) == plain_rs.owner_references[0].uid


def test_fork_is_independent() -> None:
    """Recording on a fork leaves the original untouched (dry runs)."""
    cool_down = CoolDown(timedelta(minutes=1))
    fork = cool_down.fork()
    fork.record(make_pod("web-a", owner_name="web"), T0)
    assert (cool_down.tracked, fork.tracked, fork.period) == (0, 1, timedelta(minutes=1))


def test_prune() -> None:
    """prune forgets ended cool-downs only."""
    cool_down = CoolDown()
    cool_down.record(make_pod("web-a", owner_name="web"), T0)
    cool_down.record(make_pod("db-a", owner_name="db"), T0 + timedelta(minutes=3))
    cool_down.prune(T0 + timedelta(minutes=6))
    assert cool_down.tracked == 1
