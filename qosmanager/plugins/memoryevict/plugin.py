"""BEMemoryEvict: evict best-effort pods when node memory crosses its threshold.

Gate `BEMemoryEvict` (off by default) and NodeSLO
`resourceUsedThresholdWithBE.enable`. Every tick outside the cool-down
(`--memory-evict-cool-time-seconds`, 4 s as in koordlet) the latest node memory
usage is compared with `memoryEvictThresholdPercent` of the node's capacity;
above it, BE pods are evicted in `select.candidates` order through the
`Evictor` (Eviction API, PDB-aware) until the memory of the pods actually
evicted brings the projected usage down to `memoryEvictLowerPercent`. A pod a
PodDisruptionBudget protects is skipped and the next one is tried.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import click

from metriccache import kinds
from qosmanager import evictor as qevictor
from qosmanager import features
from qosmanager.plugins import base
from qosmanager.plugins.memoryevict import select

log = logging.getLogger(__name__)

NAME = features.BE_MEMORY_EVICT
GIB = 1 << 30


class MemoryEvict(base.PeriodicStrategy):
    """The BEMemoryEvict strategy."""

    name = NAME
    interval_flag = "--memory-evict-interval-seconds"

    def __init__(
        self, handle: base.Handle | None = None, *, interval: float = 1.0, cool_time: float = 4.0
    ) -> None:
        super().__init__(handle, interval=interval)
        self.cool_time = cool_time
        self._last_evict = -math.inf

    def init_flags(self) -> Sequence[click.Parameter]:
        return [
            *super().init_flags(),
            self._flag(
                "--memory-evict-cool-time-seconds",
                "cool_time",
                "Seconds after an eviction before the next memory eviction.",
            ),
        ]

    def tick(self) -> None:
        now = self.handle.clock()
        if now < self._last_evict + self.cool_time:
            return
        thresholds = self.states.node_slo().thresholds
        node = self.states.node()
        threshold = thresholds.memory_evict_threshold_percent
        if not thresholds.enable or node is None or threshold is None:
            return
        lower = thresholds.memory_evict_lower_percent
        lower = threshold - 2 if lower is None else lower
        used = self.latest(kinds.NODE_MEMORY_USAGE, {})
        if used is None:
            log.debug("%s: no recent node memory sample", NAME)
            return
        capacity = node.capacity.memory
        usage = round(used)
        need = select.to_release(usage, capacity, threshold, lower)
        if need <= 0:
            return
        ordered = select.candidates(self.states.pods(), self.latest_by_pod(kinds.POD_MEMORY_USAGE))
        released = self.evict(ordered, need, usage, capacity, lower)
        log.info(
            "%s: node memory %.2fGi of %.2fGi, released %.2fGi of %.2fGi needed; projected %.2fGi",
            NAME,
            usage / GIB,
            capacity / GIB,
            released / GIB,
            need / GIB,
            (usage - released) / GIB,
        )

    def evict(
        self,
        ordered: Sequence[select.Candidate],
        need: int,
        usage: int,
        capacity: int,
        lower: int,
    ) -> int:
        """Evict in order until `need` bytes are released; returns the bytes released."""
        released = 0
        evicted_any = False
        for candidate in ordered:
            if released >= need:
                break
            message = (
                f"node memory usage {usage / GIB:.2f}Gi is above the threshold;"
                f" releasing {need / GIB:.2f}Gi to reach {lower}% of {capacity / GIB:.2f}Gi"
            )
            decision = self.handle.evictor.evict(candidate.pod, NAME, message)
            if decision.gone:
                released += candidate.memory
                evicted_any = evicted_any or decision is qevictor.Decision.EVICTED
        if evicted_any:
            self._last_evict = self.handle.clock()
        return released
