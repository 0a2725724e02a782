"""BECPUEvict: evict best-effort pods whose CPU satisfaction stays too low.

Gate `BECPUEvict` (off by default) and NodeSLO `resourceUsedThresholdWithBE.enable`;
the satisfaction bounds have no default, so the strategy does nothing until a
NodeSLO sets `cpuEvictBESatisfactionLowerPercent` and `...UpperPercent`
(koordlet likewise). The BE totals come from the metric cache (`be_cpu_usage`,
`be_cpu_request`, `be_cpu_quota` = the real limit CPU suppression granted):
averages over `cpuEvictTimeWindowSeconds` must show high usage and low
satisfaction, then the latest values must agree; the smaller release wins.
After an eviction the strategy cools down for `--cpu-evict-cool-time-seconds`.
"""

from __future__ import annotations

import logging

from metriccache import kinds
from qosmanager import features
from qosmanager.plugins import _evictbe
from qosmanager.plugins.cpuevict import satisfaction

log = logging.getLogger(__name__)

NAME = features.BE_CPU_EVICT


class CPUEvict(_evictbe.BEEvictStrategy):
    """The BECPUEvict strategy."""

    name = NAME
    interval_flag = "--cpu-evict-interval-seconds"
    cool_time_flag = "--cpu-evict-cool-time-seconds"
    cool_time_help = "Seconds after an eviction before the next CPU eviction."
    default_cool_time = 20.0

    def tick(self) -> None:
        if self.cooling(self.handle.clock()):
            return
        t = self.states.node_slo().thresholds
        if not t.enable:
            return
        lower, upper = (
            t.cpu_evict_be_satisfaction_lower_percent,
            t.cpu_evict_be_satisfaction_upper_percent,
        )
        problem = satisfaction.config_error(lower, upper)
        if problem is not None or lower is None or upper is None:
            log.debug("%s: %s", NAME, problem)
            return
        need = self.to_release(
            t.cpu_evict_time_window_seconds, lower, upper, t.cpu_evict_be_usage_threshold_percent
        )
        if need <= 0:
            return
        ordered = satisfaction.candidates(
            self.states.pods(), self.latest_by_pod(kinds.POD_CPU_USAGE)
        )
        released = self.evict_until(
            ((c.pod, c.request) for c in ordered),
            need,
            f"BE CPU satisfaction is below {lower}%; releasing {need}m of BE requests",
        )
        if released.evicted_at is not None:  # the cool-down starts at the last eviction
            self._last_evict = released.evicted_at
        log.info("%s: released %dm of %dm BE CPU requests", NAME, released.amount, need)

    def to_release(
        self, window_seconds: int | None, lower: int, upper: int, usage_threshold: int | None
    ) -> int:
        """Millicores of BE requests to evict: min(by the window average, by the latest)."""
        interval = self.handle.collect_interval
        window = max(float(window_seconds or 0), interval)
        averages = [
            self.average(kind, {}, window)
            for kind in (kinds.BE_CPU_USAGE, kinds.BE_CPU_REQUEST, kinds.BE_CPU_QUOTA)
        ]
        if any(a is None for a in averages):
            return 0
        usage, request, limit = (a.avg * 1000 for a in averages if a is not None)
        count = min(a.count for a in averages if a is not None)
        if count * interval < window / 3:
            log.debug("%s: %d samples do not cover a third of %gs", NAME, count, window)
            return 0
        if not satisfaction.usage_high_enough(usage, limit, usage_threshold):
            return 0
        by_average = satisfaction.to_release(request, limit, lower, upper)
        if by_average <= 0:
            return 0
        latest = [
            self.latest(kind, {})
            for kind in (kinds.BE_CPU_USAGE, kinds.BE_CPU_REQUEST, kinds.BE_CPU_QUOTA)
        ]
        if any(v is None for v in latest):
            return 0
        usage, request, limit = (v * 1000 for v in latest if v is not None)
        if not satisfaction.usage_high_enough(usage, limit, usage_threshold):
            return 0
        return min(by_average, satisfaction.to_release(request, limit, lower, upper))
