"""Retention per kind, the series cap, per-series capacity and the memory bound."""

from __future__ import annotations

import gc
import logging
import sqlite3
import tracemalloc
from pathlib import Path

import pytest

from metriccache import KindRegistry, MetricCache, MetricKind, Sample, kinds
from tests.metriccache.builders import T0, FakeClock, OpenCache, node, pod


def test_samples_past_retention_are_invisible_before_any_prune(clock: FakeClock) -> None:
    """A query never sees samples older than the kind's retention, pruned or not."""
    cache = MetricCache(kinds.default_registry(pod_retention_seconds=100), clock=clock)
    cache.append([pod("u1", T0 + t, float(t)) for t in range(50)])
    clock.advance(130)  # now T0+130: samples before T0+30 are expired
    got = cache.aggregate(kinds.POD_CPU_USAGE, {"pod_uid": "u1"}, T0, T0 + 1000)
    assert got is not None
    assert (got.first_time, got.count) == (T0 + 30, 20)


def test_prune_drops_expired_samples_and_vanished_series(clock: FakeClock) -> None:
    """After retention, a pod that stopped reporting disappears entirely."""
    cache = MetricCache(kinds.default_registry(pod_retention_seconds=60), clock=clock)
    cache.append([pod("gone", T0, 1.0), pod("alive", T0, 1.0)])
    clock.advance(50)
    cache.append([pod("alive", clock.now, 2.0)])
    clock.advance(20)  # "gone" last reported 70 s ago, "alive" 20 s ago
    assert cache.prune() == 1
    assert list(cache.aggregate_all(kinds.POD_CPU_USAGE, {}, 0, clock.now)) == [("alive",)]
    assert (cache.stats().series, cache.stats().samples) == (1, 1)


def test_retention_is_per_kind(clock: FakeClock) -> None:
    """Node series outlive pod series: 30-minute node aggregates stay available."""
    cache = MetricCache(kinds.default_registry(), clock=clock)
    cache.append([node(T0, 1.0), pod("u1", T0, 1.0)])
    clock.advance(29 * 60)
    cache.prune()
    assert cache.aggregate(kinds.NODE_CPU_USAGE, {}, clock.now - 1800, clock.now) is not None
    assert cache.aggregate_all(kinds.POD_CPU_USAGE, {}, clock.now - 1800, clock.now) == {}


def test_series_cap_drops_new_series_and_counts_them(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Beyond max_series, samples of new series are dropped, counted and warned about."""
    cache = MetricCache(kinds.default_registry(), clock=clock, max_series=3)
    with caplog.at_level(logging.WARNING, logger="metriccache"):
        cache.append([pod(f"u{i}", T0, 1.0) for i in range(5)])
        cache.append([pod("u0", T0 + 1, 2.0), pod("u9", T0 + 1, 2.0)])
    stats = cache.stats()
    assert (stats.series, stats.samples, stats.dropped_samples) == (3, 4, 3)
    assert [r.message for r in caplog.records if "max_series=3" in r.message]


def test_full_cache_admits_new_series_once_old_ones_expire(clock: FakeClock) -> None:
    """When full, expired series are pruned to make room before dropping anything."""
    cache = MetricCache(kinds.default_registry(pod_retention_seconds=60), clock=clock, max_series=2)
    cache.append([pod("a", T0, 1.0), pod("b", T0, 1.0)])
    clock.advance(61)
    cache.append([pod("c", clock.now, 1.0)])
    assert list(cache.aggregate_all(kinds.POD_CPU_USAGE, {}, 0, clock.now)) == [("c",)]
    assert cache.stats().dropped_samples == 0


def test_series_capacity_sheds_the_oldest_samples(clock: FakeClock) -> None:
    """Appending faster than max_sample_rate_hz keeps at most capacity samples."""
    registry = KindRegistry((MetricKind("k", (), 100.0),))
    cache = MetricCache(registry, clock=clock, max_sample_rate_hz=1.0)  # capacity 100
    kind = registry.get("k")
    cache.append([Sample(kind, {}, T0 + i / 10, float(i)) for i in range(1000)])
    got = cache.aggregate(kind, {}, T0, T0 + 100)
    assert got is not None
    assert 90 <= got.count <= 100
    assert got.last == 999.0


def test_disk_rows_are_pruned_too(open_cache: OpenCache, clock: FakeClock, tmp_path: Path) -> None:
    """The file keeps no batch past retention once prune and flush ran."""
    cache = open_cache(kinds=kinds.default_registry(pod_retention_seconds=60))
    for _ in range(10):
        cache.append([pod("u1", clock.now, 1.0)])
        cache.flush()
        clock.advance(30)
    cache.prune()
    cache.flush()
    with sqlite3.connect(tmp_path / "metrics.db") as conn:
        oldest = conn.execute("SELECT min(t_max) FROM batches").fetchone()[0]
        series = conn.execute("SELECT count(*) FROM series").fetchone()[0]
    assert oldest >= clock.now - 60
    assert series == 1
    cache.append([pod("u2", clock.now, 1.0)])
    clock.advance(100)
    cache.prune()
    cache.flush()
    with sqlite3.connect(tmp_path / "metrics.db") as conn:
        assert conn.execute("SELECT count(*) FROM series").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM batches").fetchone()[0] == 0


def test_memory_stays_within_the_stated_bound(open_cache: OpenCache) -> None:
    """Flooding every limit (series, rate, unflushed samples) stays under memory_bound_bytes."""
    registry = KindRegistry(
        (
            MetricKind("wide", ("pod_uid", "container_id"), 200.0),
            MetricKind("narrow", (), 50.0),
        )
    )
    wide, narrow = registry.get("wide"), registry.get("narrow")
    # Never flushed: the pending columns fill up too, the worst case.
    cache = open_cache(kinds=registry, max_series=100, max_sample_rate_hz=1.0, kv_max_bytes=4096)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        labels = [{"pod_uid": f"{p:0128d}", "container_id": "c" * 128} for p in range(120)]
        for step in range(0, 300, 100):
            batch = [Sample(wide, lab, T0 + step + i, 1.0) for lab in labels for i in range(100)]
            batch.append(Sample(narrow, {}, T0 + step, 1.0))
            cache.append(batch)
            del batch
        del labels
        for i in range(10):
            cache.kv_set(f"k{i}", "x" * 200)
        gc.collect()
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    stats = cache.stats()
    assert stats.series == 100
    assert stats.samples <= 99 * 200 + 50
    assert stats.pending_samples <= 99 * 200 + 50
    assert used <= cache.memory_bound_bytes()
    # The bound is meant to be tight enough to plan with, not astronomically loose.
    assert used >= cache.memory_bound_bytes() / 3


def test_append_prunes_when_the_interval_elapsed(clock: FakeClock) -> None:
    """Without a flusher, append itself drops vanished series every prune_interval."""
    registry = kinds.default_registry(pod_retention_seconds=60)
    cache = MetricCache(registry, clock=clock, prune_interval=30)
    cache.append([pod("gone", clock.now, 1.0)])
    clock.advance(100)
    cache.append([pod("new", clock.now, 1.0)])
    assert cache.stats().series == 1
