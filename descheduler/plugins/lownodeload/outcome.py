"""What a LowNodeLoad cycle decided: the result types of `plan.plan`.

The plugin turns these into the framework's report: each `Decision` is one
candidate pod (evicted, or a reason code from the framework's vocabulary,
e.g. "no_fit"), each `NodeReport` says what part a node played, each
`PoolReport` whether its pool could act at all ("no_destination"), and
`left_hot` why a source is still hot after its drain.

Callbacks into the framework answer with a `Refusal`-like value: a reason code
string, or any object with a `reason` code whose `str()` is the human detail
(the framework's `reasons.Refusal` is one). `reason_and_detail` reads either.
An `evictable` refusal because an eviction cap is full is a `LimitReached`,
which tells `plan` what to stop: the whole plan (the total cap), the source's
drain (its node's cap), or nothing more than this candidate (a namespace's).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from descheduler.plugins.lownodeload import fit
from descheduler.plugins.lownodeload.classify import Track
from kube import objects

__all__ = [
    "LEFT_HOT",
    "LIMIT_REACHED",
    "NOTHING_EVICTABLE",
    "NO_DESTINATION_HEADROOM",
    "Answer",
    "Decision",
    "Limit",
    "LimitReached",
    "NodeReport",
    "Plan",
    "PoolReport",
    "RefusalLike",
    "Role",
    "left_hot",
    "reason_and_detail",
]


class RefusalLike(Protocol):
    """A refusal with a reason code; `str()` of it is the detail."""

    @property
    def reason(self) -> str: ...


Answer = str | RefusalLike | None  # None: go ahead

LIMIT_REACHED = "limit_reached"
NO_DESTINATION_HEADROOM = "no_destination_headroom"
NOTHING_EVICTABLE = "nothing_evictable"
# Why a source was left over its high marks (a source report's `reason`).
LEFT_HOT = frozenset({NO_DESTINATION_HEADROOM, NOTHING_EVICTABLE, LIMIT_REACHED})


class Limit(enum.StrEnum):
    """Which eviction cap is full (maxNoOfPodsToEvictTotal, ...PerNode, ...PerNamespace)."""

    TOTAL = "total"  # no later candidate can go: the plan stops
    NODE = "node"  # no later candidate of this source can go: its drain stops
    NAMESPACE = "namespace"  # candidates of other namespaces still can


@dataclass(frozen=True, slots=True)
class LimitReached:
    """A refusal because an eviction cap is full: reason `limit_reached`, `str()` the detail."""

    limit: Limit
    detail: str

    @property
    def reason(self) -> str:
        """The reason code, `limit_reached`."""
        return LIMIT_REACHED

    def __str__(self) -> str:
        return self.detail


def reason_and_detail(answer: str | RefusalLike) -> tuple[str, str]:
    """(reason code, detail) of a refusal; a bare code has no detail."""
    if isinstance(answer, str):
        return str(answer), ""
    return str(answer.reason), str(answer)


@dataclass(frozen=True, slots=True)
class Decision:
    """What happened to one candidate: evicted when `reason` is None."""

    pod: objects.Pod
    source: objects.NodeName
    destination: objects.NodeName | None
    reason: str | None
    detail: str
    pool: str
    track: Track

    @property
    def evicted(self) -> bool:
        """Whether the eviction went ahead."""
        return self.reason is None


class Role(enum.StrEnum):
    """A node's part in the cycle."""

    SOURCE = "source"
    DESTINATION = "destination"
    NEITHER = "neither"
    UNKNOWN = "unknown"  # load unknown (reason metrics_expired)
    UNPOOLED = "unpooled"  # selected by no node pool


@dataclass(frozen=True, slots=True)
class NodeReport:
    """A node's classification; `percent` is its measured usage% (empty when unknown)."""

    node: objects.NodeName
    pool: str | None
    role: Role
    reason: str | None = None
    detail: str = ""
    percent: Mapping[str, float] = dataclasses.field(default_factory=dict)
    track: Track | None = None  # the track a source (or unconfirmed hot node) is hot on
    destination_for: frozenset[Track] = frozenset()


@dataclass(frozen=True, slots=True)
class PoolReport:
    """A pool's outcome; `reason` is `no_destination` when it could not act."""

    name: str
    reason: str | None
    detail: str
    sources: tuple[objects.NodeName, ...]
    destinations: tuple[objects.NodeName, ...]


@dataclass(frozen=True, slots=True)
class Plan:
    """A cycle's decisions (in the order taken), reports, and the final ledger."""

    decisions: tuple[Decision, ...]
    pools: tuple[PoolReport, ...]
    nodes: Mapping[objects.NodeName, NodeReport]
    ledger: fit.Ledger
    relieved: tuple[objects.NodeName, ...]  # sources brought back under their high marks
    stopped: LimitReached | None = None  # the total cap that stopped the plan, if one did
    untried: int = 0  # candidates the plan would have tried next when it stopped

    @property
    def evicted(self) -> tuple[Decision, ...]:
        """The decisions that evicted a pod."""
        return tuple(d for d in self.decisions if d.evicted)

    @property
    def reason(self) -> str | None:
        """The first pool reason, if any pool could not act."""
        return next((p.reason for p in self.pools if p.reason is not None), None)


def left_hot(
    no_headroom: bool,
    refused: Sequence[Decision],
    limit: LimitReached | None,
    *,
    evicted: int,
) -> tuple[str, str]:
    """(reason code, detail) for a source still over its high marks after its drain.

    The first that applies: an eviction cap stopped the drain (`limit_reached`);
    the destinations' headroom is used up (`no_headroom`), or every candidate
    would overload them (`no_destination_headroom`); no candidate could go
    (`nothing_evictable`, counting the refusals by reason). `evicted` pods that
    did go are mentioned first.
    """
    if limit is not None:
        code, why = LIMIT_REACHED, str(limit)
    elif no_headroom:
        code = NO_DESTINATION_HEADROOM
        why = "the destinations' headroom under their high marks is used up"
    elif refused and all(d.reason == fit.WOULD_OVERLOAD for d in refused):
        code = NO_DESTINATION_HEADROOM
        many = f"each of the {len(refused)} candidates" if len(refused) > 1 else "its candidate"
        why = f"{many} would overload every destination"
    else:
        code = NOTHING_EVICTABLE
        counts: dict[str, int] = {}
        for d in refused:
            counts[str(d.reason)] = counts.get(str(d.reason), 0) + 1
        listed = ", ".join(f"{n} {r}" for r, n in sorted(counts.items()))
        why = f"no candidate could go: {listed}" if counts else "it has no pod to move"
    return code, f"{evicted} evicted, then {why}" if evicted else why
