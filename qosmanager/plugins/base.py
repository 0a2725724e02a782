"""What the built-in strategies share: their `Handle`, the periodic loop, metric queries.

Each built-in strategy is an `ExtensionPlugin` of the same framework as the
extension plugins. It gets the host-side collaborators (cgroup fs, executor,
evictor, metrics, clock) in a frozen `Handle`, and the node-side ones (metric
cache, states) in `setup`, like any plugin. The handle is given when the
strategy is built or, by `bind`, later: the agent builds its registry (and so
its command line, from the strategies' flags) before it has parsed the
`--cgroup-root` the handle needs.
`run` calls `tick()` every interval until stop; tests call `tick()` directly
with a hand-driven clock.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import click

import cgroups
import metriccache
from kube import objects, quantity, rest
from qosmanager import evictor as qevictor
from qosmanager import executor as qexecutor
from qosmanager import metrics as qmetrics
from qosmanager import states as qstates

log = logging.getLogger(__name__)

Clock = Callable[[], float]

# Koordinator's node reservation annotation: {"resources": {"cpu": "1"}, "reservedCPUs": "0-1"}.
ANNOTATION_NODE_RESERVATION = "node.koordinator.sh/reservation"


@dataclass(frozen=True, slots=True, kw_only=True)
class Handle:
    """The host-side collaborators of the built-in strategies.

    `clock` is wall time, the clock of the metric cache's timestamps;
    `collect_interval` is the agent's collection period: "the latest sample" means
    one no older than two periods, as in koordlet.
    """

    fs: cgroups.CgroupFS
    executor: qexecutor.ResourceExecutor
    evictor: qevictor.Evictor
    metrics: qmetrics.QoSMetrics
    clock: Clock = time.time
    collect_interval: float = 1.0


class PeriodicStrategy:
    """A built-in strategy: `tick()` every `interval` seconds (0 disables it)."""

    name: ClassVar[str]
    interval_flag: ClassVar[str]

    def __init__(self, handle: Handle | None = None, *, interval: float = 1.0) -> None:
        self._handle = handle
        self.interval = interval
        self._states: qstates.States | None = None
        self._cache: metriccache.MetricCache | None = None

    def bind(self, handle: Handle) -> None:
        """Give the strategy its host-side collaborators (before `setup`)."""
        self._handle = handle

    @property
    def handle(self) -> Handle:
        if self._handle is None:
            raise RuntimeError(f"{self.name} used before bind")
        return self._handle

    def init_flags(self) -> Sequence[click.Parameter]:
        """The interval flag; subclasses add their own."""
        return [self._flag(self.interval_flag, "interval", "Seconds between runs (0 disables).")]

    def _flag(self, opt: str, attr: str, help_text: str) -> click.Option:
        def store(_ctx: click.Context, _param: click.Parameter, value: float) -> float:
            setattr(self, attr, value)
            return value

        return click.Option(
            [opt],
            type=click.FloatRange(min=0),
            default=getattr(self, attr),
            show_default=True,
            expose_value=False,
            callback=store,
            help=f"{self.name}: {help_text}",
        )

    def setup(
        self, client: rest.Rest, metric_cache: metriccache.MetricCache, states: qstates.States
    ) -> None:
        if self._handle is None:  # fails start-up, naming the plugin, not every tick
            raise RuntimeError(f"{self.name} has no Handle: bind it before setup")
        self._cache = metric_cache
        self._states = states

    @property
    def states(self) -> qstates.States:
        if self._states is None:
            raise RuntimeError(f"{self.name} used before setup")
        return self._states

    @property
    def cache(self) -> metriccache.MetricCache:
        if self._cache is None:
            raise RuntimeError(f"{self.name} used before setup")
        return self._cache

    def run(self, stop: threading.Event) -> None:
        if self.interval <= 0:
            log.info("%s disabled by its interval flag", self.name)
            return
        while not stop.is_set():
            try:
                self.tick()
            except qexecutor.ClaimRefused as err:
                # counted by the executor; the other strategy keeps the file this tick
                log.warning("%s: %s", self.name, err)
            stop.wait(self.interval)

    def tick(self) -> None:
        """One reconcile round."""
        raise NotImplementedError

    # -- metric cache queries --------------------------------------------------
    @property
    def last_window(self) -> float:
        return 2 * self.handle.collect_interval

    def latest(self, kind: metriccache.MetricKind, labels: Mapping[str, str]) -> float | None:
        """The newest sample of one series within the last window, or None."""
        now = self.handle.clock()
        found = self.cache.aggregate(kind, labels, now - self.last_window, now)
        return None if found is None else found.last

    def average(
        self, kind: metriccache.MetricKind, labels: Mapping[str, str], window: float
    ) -> metriccache.Aggregation | None:
        """Aggregates of one series over the last `window` seconds."""
        now = self.handle.clock()
        return self.cache.aggregate(kind, labels, now - window, now)

    def latest_by_pod(self, kind: metriccache.MetricKind) -> dict[str, float]:
        """Pod uid -> newest sample of a pod-level kind within the last window."""
        now = self.handle.clock()
        found = self.cache.aggregate_all(kind, {}, now - self.last_window, now)
        return {key[0]: agg.last for key, agg in found.items()}

    def average_by_pod(self, kind: metriccache.MetricKind, window: float) -> dict[str, float]:
        """Pod uid -> average of a pod-level kind over the last `window` seconds."""
        now = self.handle.clock()
        found = self.cache.aggregate_all(kind, {}, now - window, now)
        return {key[0]: agg.avg for key, agg in found.items()}


def node_reserved(node: objects.Node) -> quantity.Resources:
    """max(kubelet reservation (capacity - allocatable), Koordinator's annotation).

    Koordinator's `GetNodeResourceReserved`; an annotation naming `reservedCPUs`
    reserves that many whole CPUs.
    """
    kubelet = (node.capacity - node.allocatable).clamp_min(0)
    raw = node.annotations.get(ANNOTATION_NODE_RESERVATION)
    if not raw:
        return kubelet
    try:
        parsed = json.loads(raw)
        annotated = quantity.Resources.from_api(parsed.get("resources"))
        cpus = parsed.get("reservedCPUs")
        if cpus:
            count = len(cgroups.parse_cpuset(str(cpus)))
            annotated = annotated.max_with({quantity.CPU: count * 1000})
    except (ValueError, AttributeError, cgroups.CgroupError):
        log.warning(
            "node %s: ignoring malformed %s annotation", node.name, ANNOTATION_NODE_RESERVATION
        )
        return kubelet
    return kubelet.max_with(annotated)
