"""MigrationController limits as pure maths: defaults, counting, token buckets."""

from __future__ import annotations

from datetime import timedelta

import pytest

from descheduler.config.common import IntOrPercent
from descheduler.plugins import migrationcontroller
from descheduler.plugins.migrationcontroller import limits
from descheduler.plugins.migrationcontroller.limits import (
    Bucket,
    Caps,
    Migration,
    ObjectLimiters,
    Tally,
    Workload,
)
from tests import builders
from tests.descheduler import fakes

NOW = fakes.NOW
pct = IntOrPercent


def args(**raw: object) -> migrationcontroller.Args:
    return migrationcontroller.Args.from_mapping({"defaultJobMode": "EvictDirectly", **raw})


@pytest.mark.parametrize(
    ("replicas", "value", "expected"),
    [
        pytest.param(1, None, 1, id="one-replica"),
        pytest.param(3, None, 1, id="up-to-three-one"),
        pytest.param(4, None, 2, id="four-to-ten-two"),
        pytest.param(10, None, 2, id="ten-two"),
        pytest.param(11, None, 1, id="eleven-ten-percent-floored"),
        pytest.param(25, None, 2, id="twenty-five-ten-percent"),
        pytest.param(100, None, 10, id="hundred-ten-percent"),
        pytest.param(0, None, 0, id="no-replicas"),
        pytest.param(10, pct(3), 3, id="int"),
        pytest.param(10, pct(0), 2, id="zero-means-default"),
        pytest.param(10, pct(20, percent=True), 2, id="percent"),
        pytest.param(10, pct(5, percent=True), 1, id="small-percent-at-least-one"),
        pytest.param(3, pct(5), 3, id="at-most-replicas"),
    ],
)
def test_scaled_max_follows_koordinator(
    replicas: int, value: IntOrPercent | None, expected: int
) -> None:
    """Koordinator's GetMaxUnavailable: percent floored but >= 1, replica defaults, <= replicas."""
    assert limits.scaled_max(replicas, value) == expected


def test_caps_apply_gates_and_treat_zero_as_no_limit() -> None:
    """maxMigratingPerNode 0 lifts the limit; a skipped gate lifts its limit."""
    caps = Caps.of(
        args(
            maxMigratingPerNode=0,
            maxMigratingGlobally=5,
            maxMigratingPerNamespace=3,
            skipEvictionGates=["MaxMigratingPerNamespace", "ExpectedReplicas"],
        )
    )
    assert (caps.globally, caps.per_node, caps.per_namespace) == (5, None, None)
    assert not caps.check_expected_replicas and caps.check_per_workload
    assert Caps.of(args()).per_node == 2  # Koordinator's default


def m(
    name: str, node: str = "n1", owner: str = "rs", *, ns: str = "d", admitted: bool = True
) -> Migration:
    return Migration(f"uid-{name}", f"{ns}/{name}", ns, node, owner, admitted)


def workload(expected: int, ready: int, not_ready: int = 0) -> Workload:
    pods = [builders.make_pod(f"p{i}", namespace="d") for i in range(ready)]
    pods += [builders.make_pod(f"q{i}", namespace="d", ready=False) for i in range(not_ready)]
    return Workload("w", "ReplicaSet d/rs", expected, frozenset({"rs"}), tuple(pods))


def test_only_admitted_migrations_hold_slots_in_arbitration() -> None:
    """Pending jobs never take a slot there: ten queued on a node do not block each other."""
    tally = Tally([m(f"p{i}", admitted=False) for i in range(10)])
    assert limits.blocked(m("new"), None, tally, Caps(per_node=2)) is None
    tally.add(m("a"))
    tally.add(m("b"))
    assert limits.blocked(m("new"), None, tally, Caps(per_node=2)) == (
        "maxMigratingPerNode 2 reached on node n1 (2 migrating)"
    )
    assert limits.blocked(m("new", node="n2"), None, tally, Caps(per_node=2)) is None


def test_the_filter_counts_queued_migrations_too() -> None:
    """With `pending`, queued jobs count: a cycle does not queue more than could run."""
    tally = Tally([m("a", admitted=False), m("b", admitted=False)], pending=True)
    assert "maxMigratingPerNode 2" in (limits.blocked(m("c"), None, tally, Caps(per_node=2)) or "")


def test_a_pods_own_migration_never_counts_against_it() -> None:
    """The candidate's own job is not "another" migration."""
    tally = Tally([m("a")])
    assert limits.blocked(m("a"), None, tally, Caps(globally=1)) is None
    assert limits.blocked(m("b"), None, tally, Caps(globally=1)) == (
        "maxMigratingGlobally 1 reached (1 migrating)"
    )


@pytest.mark.parametrize(
    ("caps", "tally", "expected"),
    [
        pytest.param(
            Caps(per_namespace=1),
            [m("a", node="n9")],
            "maxMigratingPerNamespace 1 reached in namespace d (1 migrating)",
            id="namespace",
        ),
        pytest.param(Caps(per_namespace=1), [m("a", ns="other")], None, id="other-namespace"),
        pytest.param(
            Caps(per_workload=pct(1), unavailable=pct(5)),
            [m("a")],
            "maxMigratingPerWorkload 1 reached for ReplicaSet d/rs (1 migrating)",
            id="workload",
        ),
        pytest.param(
            Caps(per_workload=pct(1), unavailable=pct(5)),
            [m("a", owner="other")],
            None,
            id="other-workload",
        ),
    ],
)
def test_namespace_and_workload_limits(
    caps: Caps, tally: list[Migration], expected: str | None
) -> None:
    """Per namespace and per workload, only the matching migrations count."""
    assert limits.blocked(m("new"), workload(6, 6), Tally(tally), caps) == expected


@pytest.mark.parametrize(
    ("ready", "not_ready", "migrating", "expected"),
    [
        pytest.param(4, 0, 1, None, id="one-migrating-of-two"),
        pytest.param(4, 0, 2, "2 of 4", id="two-migrating"),
        pytest.param(3, 1, 1, "2 of 4", id="not-ready-plus-migrating"),
        pytest.param(3, 0, 0, None, id="one-missing"),
        pytest.param(2, 0, 0, "2 of 4", id="two-missing-replicas-count"),
        pytest.param(5, 0, 1, None, id="surge-pod-covers"),
    ],
)
def test_max_unavailable_counts_not_ready_missing_and_migrating(
    ready: int, not_ready: int, migrating: int, expected: str | None
) -> None:
    """maxUnavailable (2 of 4): not-Ready, missing and migrating replicas all count."""
    found = workload(4, ready, not_ready)
    tally = Tally([Migration(p.uid, p.key, "d", "n1", "rs", True) for p in found.pods[:migrating]])
    reason = limits.blocked(m("new"), found, tally, Caps(per_workload=pct(4), unavailable=None))
    if expected is None:
        assert reason is None
    else:
        assert reason is not None and "maxUnavailablePerWorkload 2" in reason and expected in reason


@pytest.mark.parametrize(
    ("expected", "caps", "problem"),
    [
        pytest.param(1, Caps(), "expects 1 replica(s)", id="single-replica"),
        pytest.param(2, Caps(), None, id="two-replicas"),
        pytest.param(
            4, Caps(unavailable=pct(100, percent=True)), "would let all go", id="all-may-go"
        ),
        pytest.param(1, Caps(check_expected_replicas=False), None, id="skipped"),
    ],
)
def test_expected_replicas(expected: int, caps: Caps, problem: str | None) -> None:
    """One replica, or limits equal to the replicas, can never migrate (unless skipped)."""
    found = limits.expected_replicas_problem(workload(expected, expected), caps)
    assert (found is None) if problem is None else (problem in (found or ""))


def test_bucket_refills_at_its_rate_up_to_burst() -> None:
    bucket = Bucket(rate=1 / 60, burst=2, now=NOW)
    bucket.take(NOW)
    bucket.take(NOW)
    assert bucket.wait(NOW) == timedelta(minutes=1)
    assert bucket.wait(NOW + timedelta(seconds=30)) == timedelta(seconds=30)
    assert bucket.tokens(NOW + timedelta(hours=1)) == 2


def test_workload_limiter_takes_tokens_at_admission() -> None:
    """2 per 10 minutes, burst 2: two admissions in a row, then a wait of 5 minutes."""
    limiter = ObjectLimiters(
        {
            "workload": migrationcontroller.args.ObjectLimiter(
                duration=timedelta(minutes=10), max_migrating=pct(2), burst=2
            )
        },
        None,
    )
    found = workload(12, 12)
    keys = limiter.keys(m("a"), found)
    assert [(k.kind, k.key, k.burst) for k in keys] == [("workload", "w", 2)]
    for _ in range(2):
        assert limiter.blocked(keys, NOW, lambda key: 0) is None
        limiter.take(keys, NOW)
    reason = limiter.blocked(keys, NOW, lambda key: 0)
    assert reason is not None and reason[1] == timedelta(minutes=5)
    assert "objectLimiters.workload: w migrated recently" in reason[0]
    assert limiter.blocked(keys, NOW + timedelta(minutes=5), lambda key: 0) is None


def test_limiter_defaults_and_reservations() -> None:
    """Koordinator's default (workload, 5m, maxMigratingPerWorkload's count), queued jobs reserve."""
    limiter = ObjectLimiters(args().object_limiters, None)
    found = workload(10, 10)  # default maxMigrating for 10 replicas: 2 per 5 minutes, burst 1
    [key] = limiter.keys(m("a"), found)
    assert key.rate == pytest.approx(2 / 300) and key.burst == 1
    assert limiter.blocked([key], NOW, lambda k: 0) is None
    assert limiter.blocked([key], NOW, lambda k: 1) is not None  # one queued ahead takes it
    namespace = ObjectLimiters(
        {
            "namespace": migrationcontroller.args.ObjectLimiter(
                duration=timedelta(minutes=1), max_migrating=pct(50, percent=True)
            )
        },
        None,
    )
    assert namespace.keys(m("a"), found) == []  # Koordinator reads a percentage here as 0
