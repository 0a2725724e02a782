"""The peak predictor: decaying usage histograms per Prod pod and per node item.

Koordinator's koordlet `peakPredictServer` (`pkg/koordlet/prediction`), in the
agent. Every `training_interval` (default 1 minute) `PredictionLoop`, run
after each collection round, reads from the metric cache the p90 of each
pod's CPU and memory over the last interval and of the node's system part
(`metriccache.kinds.SYSTEM_*`: node - pods - host apps), and `PeakPredictor.train`
adds them, weight 1, to the histograms of:

- every Prod pod (priority class Prod or none: `agent.peak.PRODUCTIVE`);
- the Prod class and the no-class class (the sum of their pods' usage, 0
  when there is none), and the system part.

Histograms (`metriccache.histogram`) are Koordinator's: CPU buckets from 25
millicores growing 5% up to 1024 cores, memory from 5 MiB growing 5% up to 2
TiB; CPU half-life 12 h, memory 24 h. `reclaimable` turns their p95 CPU and
p98 memory into `prodReclaimableMetric` (`agent.peak`).

Where nodeqos is stricter than koordlet (docs/deviations.md, `prediction-cold-start`):

- **Cold start** counts *observed* time per histogram: each training adds
  the time since that histogram's previous sample, at most two training
  intervals. A histogram observed for less than `cold_start` (default 24 h)
  predicts nothing, so a pod reclaims nothing and the node items hold the
  whole node at 0. koordlet checks only the pod's age, so after it loses its
  checkpoints it predicts at once from a few minutes of samples.
- **Persistence**: every model is checkpointed into the metric cache's
  key/value store (`prediction/<item>`) every `checkpoint_interval` (10
  minutes) and when the agent stops; `restore` loads them at start. A
  checkpoint that is corrupt, of another version or layout, or stamped in
  the future (the clock went back across the restart) is discarded - one
  log line for all of them - and its item starts its cold start again.
- **Clock**: a sample stamped before its histogram's last one by less than a
  training interval (NTP stepping the clock) is stamped at that last time; a
  larger step back discards the histograms holding samples from the
  "future", which start their cold start again. A step forward counts as at
  most two intervals of observation, so it cannot end a cold start early.
- **Vanished pods**: once the pod list is synced, a pod that is no longer on
  the node loses its histograms and its checkpoint at the next training
  (koordlet keeps them 30 minutes).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from agent import peak
from kube import classify, quantity
from metriccache import JSONValue, MetricCache, kinds
from metriccache import histogram as hist

log = logging.getLogger(__name__)

# Koordinator's defaults (prediction/config.go, peak_predictor.go).
MIN_SAMPLE_WEIGHT = 0.1
EPSILON = 0.001 * MIN_SAMPLE_WEIGHT
CPU_BUCKETS = hist.exponential_buckets(1024, 0.025, 1.05, EPSILON)  # cores
MEMORY_BUCKETS = hist.exponential_buckets(float(1 << 41), float(5 << 20), 1.05, EPSILON)  # bytes
CPU_PERCENTILE = 0.95
MEMORY_PERCENTILE = 0.98

KV_PREFIX = "prediction/"
MODEL_VERSION = 1
SYSTEM = "__node-sys__"  # koordlet's NodeItem("sys")


def class_item(priority: classify.PriorityClass) -> str:
    """A priority class's node item, as koordlet names it (`__node-koord-prod__`)."""
    return f"__node-{priority.value}__"


@dataclass(frozen=True, slots=True, kw_only=True)
class PredictorConfig:
    """The `--prediction-*` flags; defaults are koordlet's."""

    cold_start: float = 24 * 3600.0
    safety_margin_percent: int = 10
    cpu_half_life: float = 12 * 3600.0
    memory_half_life: float = 24 * 3600.0
    training_interval: float = 60.0
    checkpoint_interval: float = 600.0


class KeyValue(Protocol):
    """The metric cache's key/value half (`metriccache.MetricCache` has it)."""

    def kv_get(self, key: str, default: JSONValue = None) -> JSONValue: ...
    def kv_set(self, key: str, value: JSONValue) -> None: ...
    def kv_delete(self, key: str) -> None: ...
    def kv_keys(self, prefix: str = "") -> list[str]: ...


class _Model:
    """One item's CPU and memory histograms and how long they have been observed."""

    __slots__ = ("cpu", "dirty", "last", "memory", "observed")

    def __init__(self, config: PredictorConfig) -> None:
        self.cpu = hist.DecayingHistogram(CPU_BUCKETS, config.cpu_half_life)
        self.memory = hist.DecayingHistogram(MEMORY_BUCKETS, config.memory_half_life)
        self.last: float | None = None  # time of the latest sample
        self.observed = 0.0  # seconds of observation, for the cold start
        self.dirty = True

    def to_json(self) -> dict[str, Any]:
        return {
            "version": MODEL_VERSION,
            "last": self.last,
            "observed": self.observed,
            "cpu": self.cpu.to_checkpoint(),
            "memory": self.memory.to_checkpoint(),
        }

    @classmethod
    def from_json(cls, raw: object, config: PredictorConfig) -> _Model:
        if not isinstance(raw, Mapping):
            raise hist.CheckpointError("not an object")
        if raw.get("version") != MODEL_VERSION:
            raise hist.CheckpointError(f"version {raw.get('version')!r}, want {MODEL_VERSION}")
        last, observed = _finite(raw.get("last")), _finite(raw.get("observed"))
        if last is None or observed is None or observed < 0:
            raise hist.CheckpointError("last or observed is not a number")
        model = cls(config)
        model.cpu = hist.DecayingHistogram.from_checkpoint(
            raw.get("cpu"), CPU_BUCKETS, config.cpu_half_life
        )
        model.memory = hist.DecayingHistogram.from_checkpoint(
            raw.get("memory"), MEMORY_BUCKETS, config.memory_half_life
        )
        model.last, model.observed, model.dirty = last, observed, False
        return model


def _finite(value: object) -> float | None:
    """`value` as a float when it is a finite JSON number, else None."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


@dataclass(frozen=True, slots=True)
class Usage:
    """One item's usage over a training interval: CPU in cores, memory in bytes."""

    cpu: float
    memory: float


class PeakPredictor:
    """The histograms of the pods and node items; thread-safe. See the module docstring."""

    def __init__(self, config: PredictorConfig, store: KeyValue | None = None) -> None:
        self.config = config
        self._store = store
        self._models: dict[str, _Model] = {}
        self._lock = threading.Lock()
        self._last_checkpoint: float | None = None

    # -- training -------------------------------------------------------------------

    def train(
        self,
        now: float,
        pods: Mapping[str, tuple[classify.PriorityClass, Usage]],
        system: Usage | None,
        *,
        on_node: Iterable[str] | None = None,
    ) -> None:
        """Add one interval's usage of the Prod pods, their classes and the system part.

        `pods` are the pods with usage this interval, by UID, with their
        priority class; `on_node` (when the pod list is synced) the UIDs of
        every pod on the node: the others lose their histograms.
        """
        sums = {c: [0.0, 0.0] for c in peak.PRODUCTIVE}
        with self._lock:
            jumped: list[str] = []
            for uid, (priority, usage) in pods.items():
                if priority not in peak.PRODUCTIVE:
                    continue
                sums[priority][0] += usage.cpu
                sums[priority][1] += usage.memory
                self._add(uid, usage, now, jumped)
            for priority, (cpu, memory) in sums.items():
                self._add(class_item(priority), Usage(cpu, memory), now, jumped)
            if system is not None:
                self._add(SYSTEM, system, now, jumped)
            if jumped:
                log.warning(
                    "the clock went back: %d prediction histogram(s) held samples from the "
                    "future and were discarded; their cold start begins again",
                    len(jumped),
                )
            if on_node is not None:
                self._forget_except(set(on_node))

    def _add(self, item: str, usage: Usage, now: float, jumped: list[str]) -> None:
        model = self._models.get(item)
        last = None if model is None else model.last
        if last is not None and now < last:
            if last - now > self.config.training_interval:
                jumped.append(item)
                model, last = None, None
            else:
                now = last  # a small step back: keep the samples in order
        if model is None:
            model = self._models[item] = _Model(self.config)
        if last is not None:
            model.observed += min(now - last, 2 * self.config.training_interval)
        model.cpu.add(usage.cpu, 1.0, now)
        model.memory.add(usage.memory, 1.0, now)
        model.last, model.dirty = now, True

    def _forget_except(self, keep: set[str]) -> None:
        node_items = {SYSTEM, *(class_item(c) for c in peak.PRODUCTIVE)}
        for item in [i for i in self._models if i not in keep and i not in node_items]:
            del self._models[item]
            if self._store is not None:
                self._store.kv_delete(KV_PREFIX + item)

    # -- predictions ------------------------------------------------------------------

    def items(self) -> list[str]:
        """The items (pod UIDs and node items) with histograms, sorted."""
        with self._lock:
            return sorted(self._models)

    def observed(self, item: str) -> float:
        """Seconds `item`'s histograms have been observed (0 when it has none)."""
        with self._lock:
            model = self._models.get(item)
            return 0.0 if model is None else model.observed

    def prediction(self, item: str) -> peak.Prediction | None:
        """p95 CPU (millicores) and p98 memory of `item`; None in its cold start."""
        with self._lock:
            return self._prediction(item)

    def _prediction(self, item: str) -> peak.Prediction | None:
        model = self._models.get(item)
        if model is None or model.observed < self.config.cold_start:
            return None
        return peak.Prediction(
            int(model.cpu.percentile(CPU_PERCENTILE) * 1000),
            int(model.memory.percentile(MEMORY_PERCENTILE)),
        )

    def reclaimable(
        self, pods: Iterable[peak.PodInput], allocatable: quantity.Resources
    ) -> peak.Reclaimable:
        """`prodReclaimableMetric` and the Prod peak for `pods` (`agent.peak`)."""
        pods = list(pods)
        with self._lock:
            predictions = {
                p.uid: found for p in pods if (found := self._prediction(p.uid)) is not None
            }
            classes = {
                c: found
                for c in peak.PRODUCTIVE
                if (found := self._prediction(class_item(c))) is not None
            }
            system = self._prediction(SYSTEM)
        return peak.prod_reclaimable(
            pods,
            predictions,
            classes,
            system,
            allocatable,
            cold_start=self.config.cold_start,
            margin_percent=self.config.safety_margin_percent,
        )

    # -- persistence ------------------------------------------------------------------

    def restore(self, now: float) -> int:
        """Load the checkpoints in the store; return how many were loaded."""
        if self._store is None:
            return 0
        discarded: list[tuple[str, str]] = []
        loaded = {}
        for key in self._store.kv_keys(KV_PREFIX):
            item = key.removeprefix(KV_PREFIX)
            try:
                model = _Model.from_json(self._store.kv_get(key), self.config)
                assert model.last is not None
                if model.last - now > self.config.training_interval:
                    raise hist.CheckpointError("its samples are from the future")
            except hist.CheckpointError as err:
                discarded.append((item, str(err)))
                self._store.kv_delete(key)
                continue
            loaded[item] = model
        if discarded:
            item, reason = discarded[0]
            log.warning(
                "discarded %d prediction checkpoint(s) (%s: %s%s); their cold start begins again",
                len(discarded),
                item,
                reason,
                ", ..." if len(discarded) > 1 else "",
            )
        with self._lock:
            self._models.update(loaded)
            self._last_checkpoint = now
        return len(loaded)

    def checkpoint(self, now: float, *, force: bool = False) -> int:
        """Save the models changed since their last save, if `checkpoint_interval` passed."""
        if self._store is None:
            return 0
        with self._lock:
            due = (
                force
                or self._last_checkpoint is None
                or not 0 <= now - self._last_checkpoint < self.config.checkpoint_interval
            )
            if not due:
                return 0
            self._last_checkpoint = now
            changed = [(item, m.to_json()) for item, m in self._models.items() if m.dirty]
            for item, _ in changed:
                self._models[item].dirty = False
        for item, data in changed:
            self._store.kv_set(KV_PREFIX + item, data)
        return len(changed)


def usage_from_cache(
    cache: MetricCache, start: float, end: float
) -> tuple[dict[str, Usage], Usage | None]:
    """The p90 of each pod's CPU and memory over [start, end], and of the system part's.

    koordlet's `metricServer` feeds its histograms the p90 of the training
    interval; a pod needs both CPU and memory samples to count.
    """
    cpu = cache.aggregate_all(kinds.POD_CPU_USAGE, {}, start, end)
    memory = cache.aggregate_all(kinds.POD_MEMORY_USAGE, {}, start, end)
    pods = {}
    for key, cpu_agg in cpu.items():
        mem_agg = memory.get(key)
        if mem_agg is not None:
            pods[key[0]] = Usage(cpu_agg.p90, mem_agg.p90)
    sys_cpu = cache.aggregate(kinds.SYSTEM_CPU_USAGE, {}, start, end)
    sys_mem = cache.aggregate(kinds.SYSTEM_MEMORY_USAGE, {}, start, end)
    system = None if sys_cpu is None or sys_mem is None else Usage(sys_cpu.p90, sys_mem.p90)
    return pods, system


class PredictionLoop:
    """Trains the predictor after a collection round once per interval; checkpoints.

    `pods` returns the pods on the node by UID with their priority class, or
    None while the pod list is not synced (then nothing is trained: a pod's
    class is unknown, and no histogram is forgotten).
    The loop isolates failures: a training that raises is logged and the
    collection goes on.
    """

    def __init__(
        self,
        predictor: PeakPredictor,
        cache: MetricCache,
        pods: Callable[[], Mapping[str, classify.PriorityClass] | None],
        clock: Callable[[], float],
        monotonic: Callable[[], float],
    ) -> None:
        self.predictor = predictor
        self._cache = cache
        self._pods = pods
        self._clock = clock
        self._monotonic = monotonic
        self._next: float | None = None

    def after_round(self) -> bool:
        """Train (and checkpoint when due) if an interval has passed; True if it trained."""
        mono = self._monotonic()
        interval = self.predictor.config.training_interval
        if self._next is not None and mono < self._next:
            return False
        first = self._next is None
        self._next = mono + interval
        if first:  # the first round starts the interval; there is nothing to train on yet
            return False
        now = self._clock()
        try:
            on_node = self._pods()
            if on_node is None:  # classes unknown: a pod would land in the wrong histogram
                return False
            usage, system = usage_from_cache(self._cache, now - interval, now)
            pods = {uid: (on_node[uid], u) for uid, u in usage.items() if uid in on_node}
            self.predictor.train(now, pods, system, on_node=on_node)
            self.predictor.checkpoint(now)
        except Exception:
            log.exception("peak predictor training failed")
            return False
        return True
