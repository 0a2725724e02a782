"""`MetricCache`: the agent's memory of recent metrics, persistent across restarts.

Collectors `append` batches of samples every second; the NodeMetric reporter
and the QoS plugins ask for `aggregate`s over windows. Appends and queries may
come from any thread: one lock guards the in-memory series, and queries copy
their window out under it and compute outside it.

Memory bound, by construction (`memory_bound_bytes()` computes it for the
cache's settings; tests/metriccache/test_retention.py floods every limit and
checks the traced memory stays under it):
- at most `max_series` series; samples of further new series are dropped and
  counted in `stats().dropped_samples` (expired series are pruned first);
- per series at most ``capacity = ceil(retention_seconds * max_sample_rate_hz)``
  samples, plus at most as many not yet flushed: the times and the unflushed
  pair are float64 columns, the values float32 (`series.VALUE_TYPECODE`), so
  ``(3 * 8 + 4) * capacity * 17/16`` bytes at most (CPython over-allocates arrays
  by 1/16); an append rate above `max_sample_rate_hz` sheds the oldest samples;
- per series about 768 bytes of bookkeeping plus its label values, each at
  most `MAX_LABEL_VALUE_LENGTH` characters;
- `kv_max_bytes` for the key/value store.
With the defaults the worst case (4096 series, all of a 31-minute kind with
two labels, never flushed) is about 280 MiB. The benchmark node (250 pods,
2,257 series, flushing every 5 s) grows the process RSS by about 23 MiB in
15 minutes (bench/agent_collect.py). SQLite's page cache (2 MiB per connection by default) is extra.

Persistence: see `metriccache.store`. A background thread (daemon, stopped
by `close`) flushes new samples every `flush_interval` seconds, so a kill -9
loses at most the samples of one flush interval: those appended since the last
committed flush took its batch, including any appended while the flush the kill
interrupts is being written (the chaos soak kills agents there on purpose). Expired samples are pruned from memory (and, at the
next flush, from disk) every `prune_interval` seconds of the injected clock,
by `append` or the flusher, whichever comes first. Opening rebuilds the
in-memory series from the samples still inside retention.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from metriccache import aggregate as agg
from metriccache import backlog, kv, recovery
from metriccache import store as storage
from metriccache.errors import ClosedError, MetricCacheError, SchemaError
from metriccache.kinds import KindRegistry, MetricKind, default_registry
from metriccache.model import CacheStats, Clock, JSONValue, KindState, LabelKey, Sample
from metriccache.series import Series, series_max_bytes

log = logging.getLogger(__name__)

DEFAULT_FLUSH_INTERVAL = 5.0
# close() waits this long for the flusher: a flush blocked on a locked file gives up
# after SQLite's 5 s busy timeout, so only a hung disk keeps it longer.
CLOSE_TIMEOUT = 30.0
DEFAULT_PRUNE_INTERVAL = 60.0
DEFAULT_MAX_SERIES = 4096
DEFAULT_MAX_SAMPLE_RATE_HZ = 1.25
DEFAULT_KV_MAX_BYTES = 1 << 20
# Label values are kept in memory once per series; a cap keeps that bounded too.
MAX_LABEL_VALUE_LENGTH = 128
_DROP_WARNING_PERIOD = 60.0


class MetricCache:
    """Embedded time-series and key/value store; see the package docstring."""

    def __init__(
        self,
        kinds: KindRegistry | None = None,
        *,
        clock: Clock = time.time,
        max_series: int = DEFAULT_MAX_SERIES,
        max_sample_rate_hz: float = DEFAULT_MAX_SAMPLE_RATE_HZ,
        kv_max_bytes: int = DEFAULT_KV_MAX_BYTES,
        prune_interval: float = DEFAULT_PRUNE_INTERVAL,
    ) -> None:
        """An empty cache in memory only; `MetricCache.open` gives a persistent one."""
        if max_series < 1 or not max_sample_rate_hz > 0 or kv_max_bytes < 0:
            raise ValueError("max_series, max_sample_rate_hz must be positive, kv_max_bytes >= 0")
        if kinds is None:
            kinds = default_registry()
        self._clock = clock
        self._max_series = max_series
        self._max_rate = max_sample_rate_hz
        self._prune_interval = prune_interval
        self._lock = threading.Lock()  # the series, their tables and the counters
        self._flush_lock = threading.Lock()  # one flush at a time, batches in order
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None
        self._store: storage.Store | None = None
        self._states = {kind.name: KindState(kind, max_sample_rate_hz) for kind in kinds}
        self._n_series = 0
        self._next_sid = 1
        self._backlog = backlog.Backlog()
        self._kv = kv.KeyValueStore(None, {}, kv_max_bytes)
        self._dropped = 0
        self._flush_errors = 0
        self._last_flush: float | None = None
        self._last_prune = clock()
        self._last_full_prune = -math.inf
        self._last_drop_warning = -math.inf
        self._closed = False

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str] | None,
        *,
        kinds: KindRegistry | None = None,
        clock: Clock = time.time,
        flush_interval: float | None = DEFAULT_FLUSH_INTERVAL,
        prune_interval: float = DEFAULT_PRUNE_INTERVAL,
        max_series: int = DEFAULT_MAX_SERIES,
        max_sample_rate_hz: float = DEFAULT_MAX_SAMPLE_RATE_HZ,
        kv_max_bytes: int = DEFAULT_KV_MAX_BYTES,
    ) -> MetricCache:
        """Open (or create) the cache backed by `path`; None keeps it in memory only.

        `flush_interval` None disables the background flusher: call `flush`
        yourself (tests do). A corrupt or foreign file is moved aside with a
        warning; `PersistenceError` means the file could not be used at all.
        """
        if flush_interval is not None and not flush_interval > 0:
            raise ValueError(f"flush_interval must be > 0 or None, got {flush_interval}")
        cache = cls(
            kinds,
            clock=clock,
            max_series=max_series,
            max_sample_rate_hz=max_sample_rate_hz,
            kv_max_bytes=kv_max_bytes,
            prune_interval=prune_interval,
        )
        if path is None:
            return cache
        cache._store, loaded = storage.open_store(Path(path), clock, cache._recover)
        cache._states = loaded.states
        cache._n_series = loaded.series
        cache._backlog = backlog.Backlog(loaded.removed_sids)
        cache._next_sid = loaded.next_sid
        cache._kv = kv.KeyValueStore(cache._store, loaded.kv, kv_max_bytes)
        if flush_interval is not None:
            cache._flusher = threading.Thread(
                target=cache._run_flusher,
                args=(flush_interval,),
                name="metriccache-flusher",
                daemon=True,
            )
            cache._flusher.start()
        return cache

    def _recover(self, store: storage.Store) -> recovery.Recovered:
        # Fresh states each attempt: a failed attempt must leave nothing behind.
        states = {name: KindState(st.kind, self._max_rate) for name, st in self._states.items()}
        return recovery.recover(store, states, now=self._clock(), max_series=self._max_series)

    # -- appending --------------------------------------------------------------

    def append(self, samples: Iterable[Sample]) -> None:
        """Store a batch of samples; an invalid sample rejects the whole batch.

        `SchemaError` for an unknown kind, labels other than exactly the
        kind's, or a non-finite timestamp or value.
        """
        states = self._states
        isfinite = math.isfinite
        resolved: list[tuple[KindState, LabelKey, float, float]] = []
        for sample in samples:
            # The hot path (about 1 us per sample): cheap checks inline, the
            # detailed error messages from the slow helpers.
            kind = sample.kind
            st = states.get(kind.name)
            if st is None or kind is not st.kind:
                st = self._state_for(kind)
            labels = sample.labels
            try:
                if len(labels) != st.n_labels:
                    raise KeyError
                key = st.key_of(labels)
            except KeyError:
                key = st.exact_key(labels)  # raises SchemaError
            t = sample.timestamp
            v = sample.value
            if not (isfinite(t) and isfinite(v)):
                raise SchemaError(f"sample {kind.name}{dict(sample.labels)}: {t=} {v=} not finite")
            if key not in st.table and not all(
                type(value) is str and len(value) <= MAX_LABEL_VALUE_LENGTH for value in key
            ):
                raise SchemaError(
                    f"sample {kind.name}: label values must be str of at most"
                    f" {MAX_LABEL_VALUE_LENGTH} characters, got {key}"
                )
            resolved.append((st, key, t, v))
        now = self._clock()
        with self._lock:
            if self._closed:
                raise ClosedError("metric cache is closed")
            if now - self._last_prune >= self._prune_interval:
                # Here as well as in the flusher: a cache without one prunes too.
                self._prune_locked(now)
            for st, key, t, v in resolved:
                series = st.table.get(key)
                if series is None:
                    series = self._new_series(st, key)
                    if series is None:
                        continue
                series.add(t, v)

    def _new_series(self, st: KindState, key: LabelKey) -> Series | None:
        if self._n_series >= self._max_series:
            now = self._clock()
            if now - self._last_full_prune >= 1.0:  # one prune per clock second when full
                self._last_full_prune = now
                self._prune_locked(now)
            if self._n_series >= self._max_series:
                self._dropped += 1
                if now - self._last_drop_warning >= _DROP_WARNING_PERIOD:
                    self._last_drop_warning = now
                    log.warning(
                        "metric cache holds max_series=%d series; dropping samples of new"
                        " series (%d dropped so far)",
                        self._max_series,
                        self._dropped,
                    )
                return None
        series = Series(self._next_sid, key, st.capacity, track_pending=self._store is not None)
        self._next_sid += 1
        self._n_series += 1
        st.table[key] = series
        if self._store is not None:
            self._backlog.created(st.kind.name, series)
        return series

    # -- querying ---------------------------------------------------------------

    def _state_for(self, kind: MetricKind) -> KindState:
        st = self._states.get(kind.name)
        if st is None:
            raise SchemaError(
                f"unknown metric kind {kind.name!r}; known kinds: {', '.join(sorted(self._states))}"
            )
        if kind is not st.kind:
            st.accepts(kind)
        return st

    def aggregate(
        self, kind: MetricKind, labels: Mapping[str, str], start: float, end: float
    ) -> agg.Aggregation | None:
        """Aggregates of the one series `labels` names over [start, end]; None if no sample."""
        st = self._state_for(kind)
        key = st.exact_key(labels)
        start = max(start, self._clock() - st.kind.retention_seconds)
        with self._lock:
            series = st.table.get(key)
            window = series.window(start, end) if series is not None else None
        return None if window is None else agg.aggregate(*window)

    def aggregate_all(
        self, kind: MetricKind, labels: Mapping[str, str], start: float, end: float
    ) -> dict[LabelKey, agg.Aggregation]:
        """Aggregates of every series of `kind` whose labels include `labels`.

        Keys are the series' label values in the order of `kind.labels`, e.g.
        ``("<pod uid>",)`` for pod kinds; series without samples in the
        window are left out.
        """
        st = self._state_for(kind)
        match = st.matcher(labels)
        start = max(start, self._clock() - st.kind.retention_seconds)
        windows = []
        with self._lock:
            for key, series in st.table.items():
                if all(key[i] == value for i, value in match):
                    window = series.window(start, end)
                    if window is not None:
                        windows.append((key, window))
        return {key: agg.aggregate(*window) for key, window in windows}

    def memory_bound_bytes(self) -> int:
        """The most memory this cache's samples, series and kv store can take."""
        per_series = max(
            series_max_bytes(st.capacity, st.n_labels, MAX_LABEL_VALUE_LENGTH)
            for st in self._states.values()
        )
        return self._max_series * per_series + self._kv.max_bytes

    def stats(self) -> CacheStats:
        """Current counters."""
        with self._lock:
            every = [s for st in self._states.values() for s in st.table.values()]
            return CacheStats(
                series=self._n_series,
                samples=sum(len(s) for s in every),
                pending_samples=sum(len(s.pending_ts or ()) for s in every),
                dropped_samples=self._dropped,
                flush_errors=self._flush_errors,
                last_flush_time=self._last_flush,
            )

    # -- key/value --------------------------------------------------------------

    def kv_set(self, key: str, value: JSONValue) -> None:
        """Store a JSON-serialisable value under `key`, durably at once.

        `CapacityError` when the store would exceed `kv_max_bytes`.
        """
        self._check_open()
        self._kv.set(key, value)

    def kv_get(self, key: str, default: JSONValue = None) -> JSONValue:
        """The value stored under `key` (a fresh copy), or `default`."""
        return self._kv.get(key, default)

    def kv_keys(self, prefix: str = "") -> list[str]:
        """The keys stored that start with `prefix`, sorted."""
        return self._kv.keys(prefix)

    def kv_delete(self, key: str) -> None:
        """Forget `key` (no error if absent)."""
        self._check_open()
        self._kv.delete(key)

    # -- maintenance ------------------------------------------------------------

    def prune(self) -> int:
        """Drop samples past retention, and series left empty; return series removed.

        Disk rows follow at the next flush.
        """
        with self._lock:
            return self._prune_locked(self._clock())

    def _prune_locked(self, now: float) -> int:
        removed = 0
        for name, st in self._states.items():
            cutoff = now - st.kind.retention_seconds
            dead = [key for key, series in st.table.items() if series.trim(cutoff)]
            for key in dead:
                self._backlog.removed(st.table.pop(key))
            removed += len(dead)
            if self._store is not None:
                self._backlog.pruned(name, cutoff)
        self._n_series -= removed
        self._last_prune = now
        return removed

    def flush(self) -> int:
        """Write samples appended since the last flush; return how many.

        `PersistenceError` if the write fails; the samples stay pending
        (within each series' capacity) for the next flush.
        """
        if self._store is None:
            return 0
        with self._flush_lock:
            with self._lock:
                batch = self._backlog.collect(self._states, self._next_sid)
            if batch.empty:
                return 0
            try:
                self._store.write(batch)
            except MetricCacheError:
                with self._lock:
                    self._flush_errors += 1
                    self._backlog.restore(self._states, batch)
                raise
            self._last_flush = self._clock()
            return sum(len(seg.ts) for segs in batch.segments.values() for seg in segs)

    def _run_flusher(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                if self._clock() - self._last_prune >= self._prune_interval:
                    self.prune()
                self.flush()
            except MetricCacheError as err:
                log.warning("metric cache flush failed, will retry: %s", err)
            except Exception:
                # The only broad catch: a dead flusher would silently stop persistence.
                log.exception("metric cache flusher error, will retry")

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("metric cache is closed")

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Stop the flusher, write what is pending, close the file. Idempotent.

        A flusher still inside a write after `timeout` seconds keeps the file: the
        pending samples are then left unwritten (logged), never waited for without end.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._stop.set()
        if self._flusher is not None:
            self._flusher.join(timeout)
            if self._flusher.is_alive():
                log.warning(
                    "metric cache flusher did not stop within %.0fs; closing without the "
                    "final flush (%d sample(s) pending)",
                    timeout,
                    self.stats().pending_samples,
                )
                return
        if self._store is not None:
            try:
                self.flush()
            finally:
                self._store.close()

    def __enter__(self) -> MetricCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
