"""What BECPUEvict and BEMemoryEvict share: a cool-down after an eviction, and
evicting best-effort pods in order until enough is released.

koordlet's `plugins/cpuevict` and `plugins/memoryevict` walk their sorted
candidates the same way: stop once the released amount covers the need, count
a pod only when the evictor says it is going (`Decision.gone`), and start the
cool-down after a pod was actually evicted. What a candidate releases (CPU
request millicores, memory bytes) and when the cool-down starts stay in each
plugin.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar, TypeVar

import click

from qosmanager import evictor as qevictor
from qosmanager import states as qstates
from qosmanager.plugins import base

C = TypeVar("C")


def covering_prefix(ordered: Sequence[C], need: int, size: Callable[[C], int]) -> list[C]:
    """The prefix of `ordered` whose sizes cover `need` (all of it if they cannot)."""
    chosen: list[C] = []
    released = 0
    for candidate in ordered:
        if released >= need:
            break
        chosen.append(candidate)
        released += size(candidate)
    return chosen


@dataclass(frozen=True, slots=True)
class Released:
    """What one round of evictions gave back.

    `amount` sums the sizes of the pods that are going; `evicted_at` is the clock
    read just after the last pod actually evicted (None when none was).
    """

    amount: int
    evicted_at: float | None


class BEEvictStrategy(base.PeriodicStrategy):
    """A periodic strategy that evicts BE pods, then cools down for `cool_time` seconds."""

    cool_time_flag: ClassVar[str]
    cool_time_help: ClassVar[str]
    default_cool_time: ClassVar[float]

    def __init__(
        self,
        handle: base.Handle | None = None,
        *,
        interval: float = 1.0,
        cool_time: float | None = None,
    ) -> None:
        super().__init__(handle, interval=interval)
        self.cool_time = self.default_cool_time if cool_time is None else cool_time
        self._last_evict = -math.inf

    def init_flags(self) -> Sequence[click.Parameter]:
        return [
            *super().init_flags(),
            self._flag(self.cool_time_flag, "cool_time", self.cool_time_help),
        ]

    def cooling(self, now: float) -> bool:
        """True within `cool_time` seconds of the last eviction."""
        return now < self._last_evict + self.cool_time

    def evict_until(
        self,
        ordered: Iterable[tuple[qstates.PodMeta, int]],
        need: int,
        message: str,
    ) -> Released:
        """Evict (pod, size) candidates in order until the sizes of those going cover `need`."""
        released = 0
        evicted_at: float | None = None
        for pod, size in ordered:
            if released >= need:
                break
            decision = self.handle.evictor.evict(pod, self.name, message)
            if decision.gone:
                released += size
            if decision is qevictor.Decision.EVICTED:
                evicted_at = self.handle.clock()
        return Released(released, evicted_at)
