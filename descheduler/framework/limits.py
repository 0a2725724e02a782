"""Per-cycle eviction caps: `maxNoOfPodsToEvictPerNode`, `...PerNamespace`, `...Total`.

Counting happens at admission: when the evictor accepts a pod, before any API
call, so a dry run and a real run count exactly alike and a slow API server
cannot let a cycle overshoot (SCENARIOS.md D5). An eviction the backend then
refuses (PDB, pod gone, API error) gives its slot back: the caps bound
disruption, and a refused eviction disrupted nothing. A `Ledger` lives for one
cycle, so counters reset with each cycle. An unset limit (None) is unlimited
here; defaults are the configuration's business.

Eviction requests still in progress in background (`background.py`, KEP-1397)
outlive cycles; a ledger given them as `pending` adds them to its own counts,
as upstream's PodEvictor adds its eviction-requests cache.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Protocol

from kube import objects


class Pending(Protocol):
    """Evictions requested earlier and not finished (a `BackgroundRequests`)."""

    def __len__(self) -> int: ...
    def node_count(self, node: str) -> int: ...
    def namespace_count(self, namespace: str) -> int: ...


class _NonePending:
    def __len__(self) -> int:
        return 0

    def node_count(self, node: str) -> int:
        return 0

    def namespace_count(self, namespace: str) -> int:
        return 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    per_node: int | None = None
    per_namespace: int | None = None
    total: int | None = None


class Ledger:
    """One cycle's eviction counts against `Limits`."""

    __slots__ = ("_by_namespace", "_by_node", "_total", "limits", "pending")

    def __init__(self, limits: Limits, pending: Pending | None = None) -> None:
        self.limits = limits
        self.pending: Pending = pending if pending is not None else _NonePending()
        self._by_node: Counter[str] = Counter()
        self._by_namespace: Counter[str] = Counter()
        self._total = 0

    @property
    def total(self) -> int:
        return self._total

    def node_count(self, node: str) -> int:
        return self._by_node[node]

    def namespace_count(self, namespace: str) -> int:
        return self._by_namespace[namespace]

    def node_full(self, node: str) -> bool:
        limit = self.limits.per_node
        return limit is not None and self._by_node[node] + self.pending.node_count(node) >= limit

    def namespace_full(self, namespace: str) -> bool:
        limit = self.limits.per_namespace
        return limit is not None and (
            self._by_namespace[namespace] + self.pending.namespace_count(namespace) >= limit
        )

    def total_full(self) -> bool:
        limit = self.limits.total
        return limit is not None and self._total + len(self.pending) >= limit

    def admit(self, pod: objects.Pod) -> str | None:
        """Count the pod in, or say which limit it would break (and count nothing)."""
        if self.total_full():
            return f"maxNoOfPodsToEvictTotal ({self.limits.total}) reached" + _pending(
                len(self.pending)
            )
        if self.node_full(pod.node_name):
            return (
                f"maxNoOfPodsToEvictPerNode ({self.limits.per_node}) reached on node "
                f"{pod.node_name}" + _pending(self.pending.node_count(pod.node_name))
            )
        if self.namespace_full(pod.namespace):
            return (
                f"maxNoOfPodsToEvictPerNamespace ({self.limits.per_namespace}) reached "
                f"in namespace {pod.namespace}"
                + _pending(self.pending.namespace_count(pod.namespace))
            )
        self._by_node[pod.node_name] += 1
        self._by_namespace[pod.namespace] += 1
        self._total += 1
        return None

    def release(self, pod: objects.Pod) -> None:
        """Give back the slot of an admitted pod whose eviction did not happen."""
        self._by_node[pod.node_name] -= 1
        self._by_namespace[pod.namespace] -= 1
        self._total -= 1


def _pending(count: int) -> str:
    """What a limit message adds when evictions in background take part of it."""
    if not count:
        return ""
    return f", counting {count} eviction{'s' if count != 1 else ''} still in progress in background"
