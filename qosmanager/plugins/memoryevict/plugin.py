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
from collections.abc import Sequence

from metriccache import kinds
from qosmanager import features
from qosmanager.plugins import _evictbe
from qosmanager.plugins.memoryevict import select

log = logging.getLogger(__name__)

NAME = features.BE_MEMORY_EVICT
GIB = 1 << 30


class MemoryEvict(_evictbe.BEEvictStrategy):
    """The BEMemoryEvict strategy."""

    name = NAME
    interval_flag = "--memory-evict-interval-seconds"
    cool_time_flag = "--memory-evict-cool-time-seconds"
    cool_time_help = "Seconds after an eviction before the next memory eviction."
    default_cool_time = 4.0

    def tick(self) -> None:
        if self.cooling(self.handle.clock()):
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
        released = self.evict_until(
            ((c.pod, c.memory) for c in ordered),
            need,
            f"node memory usage {usage / GIB:.2f}Gi is above the threshold;"
            f" releasing {need / GIB:.2f}Gi to reach {lower}% of {capacity / GIB:.2f}Gi",
        )
        if released.evicted_at is not None:  # the cool-down starts once the round is over
            self._last_evict = self.handle.clock()
        return released.amount
