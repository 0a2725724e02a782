"""Arbitration: which queued PodMigrationJobs start now, in what order, and which never can.

`ordered` sorts the Pending jobs with Koordinator's three stable sorts, in its
order (so the last one decides first):

1. creation time, oldest first (Koordinator puts the newest first; among jobs
   the later sorts cannot tell apart, first come first served cannot starve);
2. the order LowNodeLoad evicts pods in (`lownodeload.order`, without usage:
   priority class, priority, QoS classes, deletion and eviction costs, pod age);
3. jobs of the same workload together, where its best-placed job stands
   (Koordinator groups only batch Jobs; any workload here, so its migrations
   run back to back instead of interleaving with everyone else's).

`judge` then gives each job, in that order, a `Verdict`: FAIL when a check
waiting cannot change fails (filters, expected replicas: Koordinator's
`ForbiddenMigratePod`), WAIT when a limit is reached, ADMIT otherwise. The
plugin's filter asks `judge` the same question for a pod during a cycle.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from descheduler.plugins.lownodeload import order
from descheduler.plugins.migrationcontroller import limits
from descheduler.plugins.migrationcontroller.filters import StaticChecks
from descheduler.plugins.migrationcontroller.limits import (
    Caps,
    LimiterKey,
    Migration,
    ObjectLimiters,
    Tally,
    Workload,
)
from descheduler.plugins.migrationcontroller.workloads import Unresolved
from kube import objects
from kube.migration import PodMigrationJob

_NO_TIME = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A Pending job with its pod, as the limits see them."""

    job: PodMigrationJob
    pod: objects.Pod
    migration: Migration
    workload: Workload | Unresolved | None


class Action(enum.Enum):
    ADMIT = "admit"
    WAIT = "wait"
    FAIL = "fail"


@dataclass(frozen=True, slots=True)
class Verdict:
    action: Action
    detail: str = ""
    retry_in: timedelta | None = None  # WAIT on a token: when one is there
    keys: tuple[LimiterKey, ...] = ()  # ADMIT: the object-limiter tokens to take


def pod_rank(pod: objects.Pod) -> tuple[object, ...]:
    """LowNodeLoad's eviction order without usage and without its name tie-break.

    `eviction_key` ends with namespace, name and UID to make its order total;
    dropping them lets the creation-time sort before this one break ties.
    """
    return order.eviction_key(pod, {}, {}, {})[:-3]


def ordered(candidates: Sequence[Candidate]) -> list[Candidate]:
    """The arbitration order (see the module docstring)."""
    by_time = sorted(
        candidates,
        key=lambda c: (c.job.metadata.creation_timestamp or _NO_TIME, c.job.metadata.name),
    )
    by_pod = sorted(by_time, key=lambda c: pod_rank(c.pod))
    first: dict[str, int] = {}
    for index, candidate in enumerate(by_pod):
        first.setdefault(_group(candidate, index), index)
    ranks = [first[_group(c, i)] for i, c in enumerate(by_pod)]
    return [c for _, c in sorted(zip(ranks, by_pod, strict=True), key=lambda pair: pair[0])]


def _group(candidate: Candidate, index: int) -> str:
    workload = candidate.workload
    if isinstance(workload, Workload):
        return f"workload:{workload.key}"
    return f"job:{index}"  # no workload: a group of its own


def judge(
    pod: objects.Pod,
    migration: Migration,
    workload: Workload | Unresolved | None,
    *,
    checks: StaticChecks,
    caps: Caps,
    tally: Tally,
    limiters: ObjectLimiters,
    now: datetime,
    reserved: Callable[[LimiterKey], int] = lambda key: 0,
) -> Verdict:
    """May this migration start now (ADMIT), later (WAIT) or never (FAIL)?"""
    problems = checks.problems(pod)
    if isinstance(workload, Workload) and not checks.lifts_expected_replicas(pod):
        problem = limits.expected_replicas_problem(workload, caps)
        if problem:
            problems.append(problem)
    if problems:
        return Verdict(Action.FAIL, "; ".join(problems))
    if isinstance(workload, Unresolved):
        return Verdict(Action.WAIT, workload.reason)
    reason = limits.blocked(migration, workload, tally, caps)
    if reason:
        return Verdict(Action.WAIT, reason)
    keys = tuple(limiters.keys(migration, workload))
    limited = limiters.blocked(keys, now, reserved)
    if limited is not None:
        detail, wait = limited
        return Verdict(Action.WAIT, detail, retry_in=wait)
    return Verdict(Action.ADMIT, keys=keys)
