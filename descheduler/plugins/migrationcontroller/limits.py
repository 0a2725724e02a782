"""The migration limits, as pure functions over what is in flight: who may migrate now.

Two callers, one rule set:

- the plugin's `filter`, during a descheduling cycle: every unfinished job
  (Pending or Running) and every eviction earlier in the cycle is in flight, so
  a plugin never queues more than the limits could let through;
- the arbitration pass of the controller: only admitted jobs (phase Running)
  are in flight. A Pending job never takes a slot, so a queue longer than a
  limit drains instead of deadlocking (Koordinator counted Pending jobs here
  too: with `maxMigratingPerNode: 2`, ten queued jobs on one node each saw nine
  others and none ever ran).

The limits (Koordinator's `MigrationControllerArgs`): `maxMigratingGlobally`,
`maxMigratingPerNode`, `maxMigratingPerNamespace` (0 or unset: no limit),
`maxMigratingPerWorkload` and `maxUnavailablePerWorkload` (int or percent of
the workload's expected replicas; unset: Koordinator's replica-based defaults,
`scaled_max`), each skippable through `skipEvictionGates`; and the object
limiters (`objectLimiters`), token buckets per workload or namespace that
refill `maxMigrating` tokens per `duration`. A token is taken when a job is
admitted, not when its eviction completes: Koordinator took it after the
eviction, so every job admitted before the first one finished passed a full
bucket and the workload limiter did not limit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from descheduler.config.common import IntOrPercent
from descheduler.plugins.migrationcontroller.args import (
    EvictionGate,
    MigrationControllerArgs,
    ObjectLimiter,
)
from kube import objects

WORKLOAD = "workload"
NAMESPACE = "namespace"
_TERMINAL_POD_PHASES = frozenset({"Succeeded", "Failed"})


def scaled_max(replicas: int, value: IntOrPercent | None) -> int:
    """Koordinator's `GetMaxUnavailable` (and `GetMaxMigrating`).

    A percentage rounds down, but a non-zero one never below 1; unset or 0
    means the defaults: more than 10 replicas 10%, 4 to 10 replicas 2, else 1.
    Never more than `replicas`.
    """
    found = 0
    if value is not None:
        found = value.scaled(replicas, round_up=False)
        if found == 0 and value.value > 0:
            found = 1
    if found == 0:
        if replicas > 10:
            found = IntOrPercent(10, percent=True).scaled(replicas, round_up=False)
        elif replicas >= 4:
            found = 2
        else:
            found = 1
    return min(found, replicas)


def is_available(pod: objects.Pod) -> bool:
    """Active (not terminal, not terminating) and Ready, as Koordinator counts availability."""
    return (
        pod.phase not in _TERMINAL_POD_PHASES
        and not pod.is_terminating
        and pod.condition("Ready") == "True"
    )


@dataclass(frozen=True, slots=True)
class Migration:
    """One migration in flight (or asking to be), reduced to what the limits look at."""

    pod_uid: str
    pod_key: str  # namespace/name
    namespace: str
    node: str = ""  # "" when the pod was never seen
    owner: str = ""  # the pod's controller UID, "" for none
    admitted: bool = False  # Running: holds a slot in arbitration

    def same_pod(self, other: Migration) -> bool:
        if self.pod_uid and other.pod_uid:
            return self.pod_uid == other.pod_uid
        return self.pod_key == other.pod_key


@dataclass(frozen=True, slots=True)
class Workload:
    """A pod's workload: its expected replicas and the pods it has now."""

    key: str  # the top workload's UID (the Deployment of a ReplicaSet)
    description: str  # "Deployment web"
    expected: int  # spec.replicas
    members: frozenset[str]  # owner UIDs whose pods belong to it (its ReplicaSets)
    pods: tuple[objects.Pod, ...] = ()


@dataclass(frozen=True, slots=True)
class Caps:
    """The concurrency limits in force (gates applied); None is no limit."""

    globally: int | None = None
    per_node: int | None = None
    per_namespace: int | None = None
    per_workload: IntOrPercent | None = None
    unavailable: IntOrPercent | None = None
    check_per_workload: bool = True
    check_unavailable: bool = True
    check_expected_replicas: bool = True

    @classmethod
    def of(cls, args: MigrationControllerArgs) -> Caps:
        skipped = frozenset(args.skip_eviction_gates)

        def cap(gate: EvictionGate, value: int | None) -> int | None:
            return None if gate in skipped or not value or value <= 0 else value

        return cls(
            globally=cap(EvictionGate.MAX_MIGRATING_GLOBALLY, args.max_migrating_globally),
            per_node=cap(EvictionGate.MAX_MIGRATING_PER_NODE, args.max_migrating_per_node),
            per_namespace=cap(
                EvictionGate.MAX_MIGRATING_PER_NAMESPACE, args.max_migrating_per_namespace
            ),
            per_workload=args.max_migrating_per_workload,
            unavailable=args.max_unavailable_per_workload,
            check_per_workload=EvictionGate.MAX_MIGRATING_PER_WORKLOAD not in skipped,
            check_unavailable=EvictionGate.MAX_UNAVAILABLE_PER_WORKLOAD not in skipped,
            check_expected_replicas=(
                EvictionGate.EXPECTED_REPLICAS not in skipped
                and not args.skip_check_expected_replicas
            ),
        )


@dataclass(slots=True)
class Tally:
    """The migrations in flight; `pending` says whether unadmitted ones count."""

    migrations: list[Migration] = field(default_factory=list)
    pending: bool = False

    def add(self, migration: Migration) -> None:
        self.migrations.append(migration)

    def remove(self, migration: Migration) -> None:
        self.migrations.remove(migration)

    def others(self, candidate: Migration) -> list[Migration]:
        """What counts against `candidate`: in flight, not the candidate's own pod."""
        return [
            m for m in self.migrations if (m.admitted or self.pending) and not m.same_pod(candidate)
        ]


def expected_replicas_problem(workload: Workload, caps: Caps) -> str | None:
    """Koordinator's `filterExpectedReplicas`: a workload that cannot lose a pod safely.

    One replica, or a per-workload limit that equals the replica count (every
    pod may go at once), makes the pod unmigratable; this never gets better by
    waiting, so arbitration fails such a job at once.
    """
    if not caps.check_expected_replicas:
        return None
    expected = workload.expected
    max_migrating = scaled_max(expected, caps.per_workload)
    max_unavailable = scaled_max(expected, caps.unavailable)
    if expected <= 1:
        return f"{workload.description} expects {expected} replica(s); it cannot lose one"
    if expected in (max_migrating, max_unavailable):
        return (
            f"{workload.description} expects {expected} replicas and its limits "
            f"(maxMigrating {max_migrating}, maxUnavailable {max_unavailable}) would let all go"
        )
    return None


def blocked(
    candidate: Migration, workload: Workload | None, tally: Tally, caps: Caps
) -> str | None:
    """Why `candidate` must wait for a slot, or None when every limit holds."""
    others = tally.others(candidate)
    if caps.globally is not None and len(others) >= caps.globally:
        return f"maxMigratingGlobally {caps.globally} reached ({len(others)} migrating)"
    if caps.per_node is not None and candidate.node:
        n = sum(1 for m in others if m.node == candidate.node)
        if n >= caps.per_node:
            return (
                f"maxMigratingPerNode {caps.per_node} reached on node {candidate.node} "
                f"({n} migrating)"
            )
    if caps.per_namespace is not None:
        n = sum(1 for m in others if m.namespace == candidate.namespace)
        if n >= caps.per_namespace:
            return (
                f"maxMigratingPerNamespace {caps.per_namespace} reached in namespace "
                f"{candidate.namespace} ({n} migrating)"
            )
    if workload is None:
        return None
    return _workload_blocked(workload, others, caps)


def _workload_blocked(workload: Workload, others: list[Migration], caps: Caps) -> str | None:
    migrating = [m for m in others if m.owner and m.owner in workload.members]
    if caps.check_per_workload and migrating:
        cap = scaled_max(workload.expected, caps.per_workload)
        if len(migrating) >= cap:
            return (
                f"maxMigratingPerWorkload {cap} reached for {workload.description} "
                f"({len(migrating)} migrating)"
            )
    if caps.check_unavailable:
        cap = scaled_max(workload.expected, caps.unavailable)
        moving = {m.pod_uid for m in migrating} | {m.pod_key for m in migrating}
        healthy = sum(
            1
            for p in workload.pods
            if is_available(p) and p.uid not in moving and p.key not in moving
        )
        # Missing replicas count as unavailable too (Koordinator only counted the
        # pods it found, so a replica between deletion and re-creation was free).
        unavailable = max(0, workload.expected - healthy)
        if unavailable >= cap:
            return (
                f"maxUnavailablePerWorkload {cap} reached for {workload.description} "
                f"({unavailable} of {workload.expected} unavailable or migrating)"
            )
    return None


# -- object limiters ------------------------------------------------------------------


class Bucket:
    """A token bucket over an injected clock: `rate` tokens per second, `burst` capacity."""

    __slots__ = ("_at", "_tokens", "burst", "rate")

    def __init__(self, rate: float, burst: int, now: datetime) -> None:
        self.rate = rate
        self.burst = burst
        self._tokens = float(burst)
        self._at = now

    def tokens(self, now: datetime) -> float:
        elapsed = max(0.0, (now - self._at).total_seconds())
        return min(float(self.burst), self._tokens + elapsed * self.rate)

    def _advance(self, now: datetime) -> None:
        self._tokens = self.tokens(now)
        self._at = max(now, self._at)

    def retune(self, rate: float, burst: int, now: datetime) -> None:
        self._advance(now)
        self.rate, self.burst = rate, burst
        self._tokens = min(self._tokens, float(burst))

    def take(self, now: datetime, count: float = 1.0) -> None:
        self._advance(now)
        self._tokens -= count

    def wait(self, now: datetime, needed: float = 1.0) -> timedelta:
        """How long until `needed` tokens are there (zero when they are)."""
        missing = needed - self.tokens(now)
        if missing <= 0:
            return timedelta(0)
        return timedelta(seconds=missing / self.rate) if self.rate > 0 else timedelta.max

    def full(self, now: datetime) -> bool:
        return self.tokens(now) >= self.burst


@dataclass(frozen=True, slots=True)
class LimiterKey:
    kind: str  # "workload" or "namespace"
    key: str  # the workload's UID or the namespace
    rate: float  # tokens per second
    burst: int


class ObjectLimiters:
    """`objectLimiters`: one token bucket per workload (or namespace) that migrated recently."""

    def __init__(
        self, config: Mapping[str, ObjectLimiter], per_workload: IntOrPercent | None
    ) -> None:
        self._config = {k: v for k, v in config.items() if v.duration > timedelta(0)}
        self._per_workload = per_workload
        self._buckets: dict[tuple[str, str], Bucket] = {}

    def keys(self, migration: Migration, workload: Workload | None) -> list[LimiterKey]:
        """The buckets a migration draws from (none when a limit resolves to 0)."""
        found = []
        for kind, limiter in sorted(self._config.items()):
            if kind == WORKLOAD:
                if workload is None:
                    continue
                chosen = limiter.max_migrating
                if chosen is None or chosen.value == 0:
                    chosen = self._per_workload
                most, key = scaled_max(workload.expected, chosen), workload.key
            else:
                # Koordinator reads a percentage here as 0: no limit.
                chosen = limiter.max_migrating
                most = 0 if chosen is None or chosen.percent else chosen.value
                key = migration.namespace
            if most <= 0:
                continue
            rate = most / limiter.duration.total_seconds()
            found.append(LimiterKey(kind, key, rate, limiter.burst or 1))
        return found

    def _bucket(self, key: LimiterKey, now: datetime) -> Bucket:
        bucket = self._buckets.get((key.kind, key.key))
        if bucket is None:
            bucket = self._buckets[(key.kind, key.key)] = Bucket(key.rate, key.burst, now)
        elif (bucket.rate, bucket.burst) != (key.rate, key.burst):
            bucket.retune(key.rate, key.burst, now)
        return bucket

    def blocked(
        self, keys: Iterable[LimiterKey], now: datetime, reserved: Callable[[LimiterKey], int]
    ) -> tuple[str, timedelta] | None:
        """Why the migration must wait for a token and for how long, or None.

        `reserved(key)`: tokens already promised to migrations queued before
        this one (the filter counts a cycle's queued jobs; arbitration passes 0).
        """
        for key in keys:
            bucket = self._buckets.get((key.kind, key.key))
            needed = 1.0 + reserved(key)
            if bucket is None:
                if needed <= key.burst:
                    continue
                bucket = Bucket(key.rate, key.burst, now)
            wait = bucket.wait(now, needed)
            if wait > timedelta(0):
                per = timedelta(seconds=round(1 / key.rate)) if key.rate else timedelta.max
                return (
                    f"objectLimiters.{key.kind}: {key.key} migrated recently "
                    f"(one migration per {per}, burst {key.burst})",
                    wait,
                )
        return None

    def take(self, keys: Iterable[LimiterKey], now: datetime) -> None:
        for key in keys:
            self._bucket(key, now).take(now)

    def refund(self, keys: Iterable[LimiterKey], now: datetime) -> None:
        for key in keys:
            self._bucket(key, now).take(now, -1.0)

    def prune(self, now: datetime) -> None:
        """Forget full buckets: a full bucket is the same as none (bounded memory)."""
        for key in [k for k, b in self._buckets.items() if b.full(now)]:
            del self._buckets[key]
