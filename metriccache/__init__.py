"""The agent's embedded time-series and key/value store, persistent across restarts.

Collectors append samples every second; the NodeMetric reporter and the QoS
plugins query aggregates; static node facts live in the key/value half. This
package imports nothing else of nodeqos.

    from metriccache import MetricCache, Sample, kinds

    cache = MetricCache.open(path, kinds=kinds.default_registry(), clock=time.time,
                             flush_interval=5.0)
    cache.append([Sample(kinds.POD_CPU_USAGE, {"pod_uid": uid}, now, 0.5), ...])
    node = cache.aggregate(kinds.NODE_CPU_USAGE, {}, now - 300, now)  # Aggregation | None
    if node is not None and node.covers(now - 300, now):
        report(node.avg, node.p50, node.p90, node.p95, node.p99)
    pods = cache.aggregate_all(kinds.POD_CPU_USAGE, {}, now - 300, now)
    # {("<pod uid>",): Aggregation, ...}: keys are label values in kind.labels order
    cache.kv_set("cpu_topology", {"sockets": 1, "cores": 8})
    cache.kv_get("cpu_topology")
    cache.flush()  # the background flusher does this every flush_interval
    cache.close()

Public surface:

- `MetricCache.open(path | None, *, kinds, clock, flush_interval, prune_interval,
  max_series, max_sample_rate_hz, kv_max_bytes)`; `MetricCache(kinds, ...)` is
  the same without a file.
- `append(Iterable[Sample])`; `aggregate(kind, labels, start, end) -> Aggregation | None`
  (labels: exactly the kind's); `aggregate_all(kind, labels, start, end) ->
  dict[LabelKey, Aggregation]` (labels: any subset); windows are [start, end],
  both ends included, clipped to the kind's retention.
- `kv_set(key, JSONValue)`, `kv_get(key, default=None)`, `kv_keys(prefix="")`,
  `kv_delete(key)`.
- `metriccache.histogram`: decaying histograms with versioned checkpoints, the
  peak predictor's store of usage distributions (kept in the kv half).
- `flush() -> int`, `prune() -> int`, `stats() -> CacheStats`,
  `memory_bound_bytes() -> int`, `close()` (also a context manager).
- `Aggregation(avg, p50, p90, p95, p99, last, count, first_time, last_time)`
  with `duration` and `covers(window_start, window_end, fraction=0.5)`;
  percentiles are nearest-rank, as Koordinator's koordlet computes them.
- `MetricKind(name, labels, retention_seconds, unit)`, `KindRegistry`, and in
  `metriccache.kinds` the built-in kinds and `default_registry()`.
- Errors: `MetricCacheError` > `SchemaError` (unknown kind or label; also a
  ValueError), `CapacityError`, `PersistenceError`, `ClosedError`.

Memory bound: see `metriccache.cache`; persistence: see `metriccache.store`.
"""

from metriccache import histogram, kinds
from metriccache.aggregate import Aggregation
from metriccache.cache import MetricCache
from metriccache.errors import (
    CapacityError,
    ClosedError,
    MetricCacheError,
    PersistenceError,
    SchemaError,
)
from metriccache.kinds import KindRegistry, MetricKind
from metriccache.model import CacheStats, JSONValue, LabelKey, Sample

__all__ = [
    "Aggregation",
    "CacheStats",
    "CapacityError",
    "ClosedError",
    "JSONValue",
    "KindRegistry",
    "LabelKey",
    "MetricCache",
    "MetricCacheError",
    "MetricKind",
    "PersistenceError",
    "Sample",
    "SchemaError",
    "histogram",
    "kinds",
]
