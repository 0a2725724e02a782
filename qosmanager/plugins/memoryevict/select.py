"""Which best-effort pods to evict when node memory is too high (pure).

From koordlet's `plugins/memoryevict/memory_evict.go`: when node memory usage
reaches memoryEvictThresholdPercent of capacity, release enough to come back to
memoryEvictLowerPercent (default threshold - 2). Only BE pods are candidates,
ordered by priority (lowest first), then memory usage (largest first; pods with
no sample last), then name; they are taken in order until the released memory
covers the excess. Amounts are bytes, exact integers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kube import classify
from qosmanager import states as qstates
from qosmanager.plugins import _evictbe


@dataclass(frozen=True, slots=True)
class Candidate:
    """A BE pod and its latest memory usage in bytes (0 when unknown)."""

    pod: qstates.PodMeta
    memory: int


def to_release(usage: int, capacity: int, threshold_percent: int, lower_percent: int) -> int:
    """Bytes to free: usage above the lower watermark, 0 while below the threshold."""
    if capacity <= 0 or usage * 100 < capacity * threshold_percent:
        return 0
    return max(usage - capacity * lower_percent // 100, 0)


def candidates(pods: Iterable[qstates.PodMeta], memory_by_uid: dict[str, float]) -> list[Candidate]:
    """The BE pods (by Koordinator QoS) in eviction order; LS and LSR pods never appear."""
    found = [
        Candidate(p, round(memory_by_uid.get(p.uid, 0.0)))
        for p in pods
        if p.qos is classify.KoordQOS.BE
    ]
    return sorted(found, key=lambda c: (c.pod.priority, c.memory == 0, -c.memory, c.pod.key))


def select(ordered: Sequence[Candidate], need: int) -> list[Candidate]:
    """The prefix of `ordered` whose memory covers `need` (all of it if it cannot)."""
    return _evictbe.covering_prefix(ordered, need, lambda c: c.memory)
