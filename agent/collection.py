"""The collection round: run every collector once, then append the samples.

`Collection.run_round` is what the agent's `Ticker` calls each interval. It is
the only place that catches broadly: a collector that raises (a bug, not a
vanished pod - those are handled inside the collectors) is logged, counted as
`reason="internal"`, and the other collectors still run. Each collector is
timed into `nodeqos_agent_collect_duration_seconds{collector}`. The
"collector" readiness component turns ready after the first round in which
every collector ran and the samples reached the cache, and stays ready.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from agent import health
from agent.collectors import Collector, Reason, Round
from agent.schedule import Clock
from agent.telemetry import AgentMetrics
from metriccache import MetricCache, MetricCacheError

log = logging.getLogger(__name__)


class Collection:
    """Runs the collectors round after round into one metric cache."""

    __slots__ = (
        "_cache",
        "_clock",
        "_collectors",
        "_durations",
        "_ever_ok",
        "_metrics",
        "_ready",
        "_rounds",
    )

    def __init__(
        self,
        collectors: Sequence[Collector],
        cache: MetricCache,
        clock: Clock,
        metrics: AgentMetrics,
        readiness: health.Readiness,
    ) -> None:
        self._collectors = tuple(collectors)
        self._cache = cache
        self._clock = clock
        self._metrics = metrics
        # resolved once: .labels() is a dict lookup under a lock, per call
        self._durations = {c.name: metrics.collect_duration.labels(c.name) for c in collectors}
        self._ready = readiness.register("collector", "no round yet")
        self._rounds = 0
        self._ever_ok = False

    @property
    def rounds(self) -> int:
        """Rounds run so far."""
        return self._rounds

    def run_round(self) -> Round:
        """Collect once from every collector and append the samples to the cache."""
        rnd = Round(index=self._rounds, time=self._clock.time(), monotonic=self._clock.monotonic())
        self._rounds += 1
        healthy = True
        for collector in self._collectors:
            started = time.perf_counter()
            try:
                collector.collect(rnd)
            except Exception:
                # Isolate the failure: one broken collector must not stop the others.
                log.exception("collector %s failed in round %d", collector.name, rnd.index)
                self._metrics.errors(collector.name, Reason.INTERNAL)
                healthy = False
            finally:
                self._durations[collector.name].observe(time.perf_counter() - started)
        try:
            self._cache.append(rnd.samples)
        except MetricCacheError as err:
            log.error("round %d: metric cache refused the samples: %s", rnd.index, err)
            self._metrics.errors("cache", Reason.INTERNAL)
            healthy = False
        self._metrics.rounds.inc()
        if healthy:
            self._ever_ok = True
            self._ready.set(True, f"round {rnd.index} ok, {len(rnd.samples)} samples")
        else:
            # Ready stays ready: later failures show in the error counter and here.
            self._ready.set(self._ever_ok, f"round {rnd.index} had a collector failure")
        return rnd
