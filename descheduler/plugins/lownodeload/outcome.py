"""What a LowNodeLoad cycle decided: the result types of `plan.plan`.

The plugin turns these into the framework's report: each `Decision` is one
candidate pod (evicted, or a reason code from the framework's vocabulary,
e.g. "no_fit"), each `NodeReport` says what part a node played, each
`PoolReport` whether its pool could act at all ("no_destination").

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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from descheduler.plugins.lownodeload import fit
from descheduler.plugins.lownodeload.classify import Track
from kube import objects

__all__ = [
    "LIMIT_REACHED",
    "Answer",
    "Decision",
    "Limit",
    "LimitReached",
    "NodeReport",
    "Plan",
    "PoolReport",
    "RefusalLike",
    "Role",
    "reason_and_detail",
]


class RefusalLike(Protocol):
    """A refusal with a reason code; `str()` of it is the detail."""

    @property
    def reason(self) -> str: ...


Answer = str | RefusalLike | None  # None: go ahead

LIMIT_REACHED = "limit_reached"


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
