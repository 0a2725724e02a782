"""Aggregates against hand-computed values: nearest rank, n = 1, ties, order."""

from __future__ import annotations

import random

import pytest

from metriccache import Aggregation, MetricCache, kinds
from metriccache.aggregate import aggregate, percentile
from tests.metriccache.builders import T0, FakeClock, container, node, pod


@pytest.fixture
def cache(clock: FakeClock) -> MetricCache:
    clock.now = T0 + 100
    return MetricCache(kinds.default_registry(), clock=clock)


def test_single_sample_is_every_aggregate(cache: MetricCache) -> None:
    """With n = 1 every percentile, the average and last are that sample."""
    cache.append([node(T0 + 10, 2.5)])
    got = cache.aggregate(kinds.NODE_CPU_USAGE, {}, T0, T0 + 20)
    assert got == Aggregation(2.5, 2.5, 2.5, 2.5, 2.5, 2.5, 1, T0 + 10, T0 + 10)
    assert got.duration == 0


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        # n=10: p50 -> index int(5)-1=4, p90 -> int(9)-1=8, p95 -> int(9.5)-1=8, p99 -> 8
        pytest.param(list(range(1, 11)), (5.5, 5, 9, 9, 9), id="one-to-ten"),
        # n=3: p50 -> int(1.5)-1=0, p90/p95/p99 -> int(2.x)-1=1 (Koordinator's p99 of 3)
        pytest.param([3, 1, 2], (2.0, 1, 2, 2, 2), id="three"),
        # n=2: p50 -> max(int(1)-1, 0)=0, p99 -> int(1.98)-1=0
        pytest.param([4, 8], (6.0, 4, 4, 4, 4), id="two"),
        # ties: sorted [2,2,2,5]; p50 -> 1, p90 -> int(3.6)-1=2, p99 -> int(3.96)-1=2
        pytest.param([2, 5, 2, 2], (2.75, 2, 2, 2, 2), id="ties"),
        pytest.param([7, 7, 7, 7, 7], (7.0, 7, 7, 7, 7), id="all-equal"),
        # n=100: the textbook ranks
        pytest.param(list(range(1, 101)), (50.5, 50, 90, 95, 99), id="one-to-hundred"),
        # n=20: p95 -> int(19)-1=18 -> 19, p99 -> int(19.8)-1=18 -> 19
        pytest.param(list(range(1, 21)), (10.5, 10, 18, 19, 19), id="one-to-twenty"),
    ],
)
def test_nearest_rank_percentiles(
    cache: MetricCache, values: list[int], expected: tuple[float, ...]
) -> None:
    """Percentiles take sorted[max(int(n*p) - 1, 0)], the average the plain mean."""
    shuffled = list(values)
    random.Random(7).shuffle(shuffled)
    cache.append([node(T0 + i, float(v)) for i, v in enumerate(shuffled)])
    got = cache.aggregate(kinds.NODE_CPU_USAGE, {}, T0, T0 + 1000)
    assert got is not None
    assert (got.avg, got.p50, got.p90, got.p95, got.p99) == pytest.approx(expected)
    assert got.count == len(values)
    assert got.last == shuffled[-1]


def test_out_of_order_samples_are_placed_by_time(cache: MetricCache) -> None:
    """Samples appended out of order count by timestamp: last is the latest, windows by time."""
    cache.append([node(T0 + 30, 3.0), node(T0 + 10, 1.0)])
    cache.append([node(T0 + 20, 2.0), node(T0 + 5, 0.5)])
    got = cache.aggregate(kinds.NODE_CPU_USAGE, {}, T0, T0 + 100)
    assert got is not None
    assert (got.last, got.first_time, got.last_time, got.count) == (3.0, T0 + 5, T0 + 30, 4)
    inner = cache.aggregate(kinds.NODE_CPU_USAGE, {}, T0 + 10, T0 + 20)
    assert inner is not None
    assert (inner.count, inner.avg, inner.last) == (2, 1.5, 2.0)


def test_equal_timestamps_keep_arrival_order(cache: MetricCache) -> None:
    """Two samples at one timestamp both count; last is the one appended last."""
    cache.append([node(T0 + 1, 1.0), node(T0 + 2, 5.0), node(T0 + 2, 4.0), node(T0 + 1, 9.0)])
    got = cache.aggregate(kinds.NODE_CPU_USAGE, {}, T0, T0 + 10)
    assert got is not None
    assert (got.count, got.last, got.avg) == (4, 4.0, 4.75)


def test_window_includes_both_ends(cache: MetricCache) -> None:
    """The window is [start, end]: samples exactly at either end count."""
    cache.append([node(T0 + t, float(t)) for t in range(10)])
    got = cache.aggregate(kinds.NODE_CPU_USAGE, {}, T0 + 2, T0 + 4)
    assert got is not None
    assert (got.count, got.first_time, got.last_time) == (3, T0 + 2, T0 + 4)


def test_empty_window_and_unknown_series_give_none(cache: MetricCache) -> None:
    """No sample in the window, or no such series, is None (not zeros)."""
    cache.append([pod("u1", T0 + 50, 1.0)])
    assert cache.aggregate(kinds.POD_CPU_USAGE, {"pod_uid": "u1"}, T0, T0 + 49) is None
    assert cache.aggregate(kinds.POD_CPU_USAGE, {"pod_uid": "u2"}, T0, T0 + 100) is None
    assert cache.aggregate_all(kinds.POD_CPU_USAGE, {}, T0 + 51, T0 + 100) == {}


def test_aggregate_all_filters_by_label_subset(cache: MetricCache) -> None:
    """aggregate_all matches a label subset and keys results by label values in schema order."""
    cache.append(
        [
            container("u1", "c1", T0 + 1, 1.0),
            container("u1", "c2", T0 + 1, 2.0),
            container("u2", "c3", T0 + 1, 3.0),
        ]
    )
    of_u1 = cache.aggregate_all(kinds.CONTAINER_CPU_USAGE, {"pod_uid": "u1"}, T0, T0 + 2)
    assert {key: a.avg for key, a in of_u1.items()} == {("u1", "c1"): 1.0, ("u1", "c2"): 2.0}
    every = cache.aggregate_all(kinds.CONTAINER_CPU_USAGE, {}, T0, T0 + 2)
    assert sorted(every) == [("u1", "c1"), ("u1", "c2"), ("u2", "c3")]
    one = cache.aggregate_all(kinds.CONTAINER_CPU_USAGE, {"container_id": "c3"}, T0, T0 + 2)
    assert list(one) == [("u2", "c3")]


@pytest.mark.parametrize(
    ("first", "last", "expected"),
    [
        pytest.param(0.0, 150.0, True, id="exactly-half"),
        pytest.param(100.0, 249.0, False, id="just-under-half"),
        pytest.param(0.0, 300.0, True, id="full"),
        pytest.param(5.0, 5.0, False, id="one-sample"),
    ],
)
def test_covers_applies_the_half_window_rule(first: float, last: float, expected: bool) -> None:
    """covers() is true when first..last spans at least half the window."""
    got = aggregate(first, last, [1.0, 2.0])
    assert got.covers(0.0, 300.0) is expected


def test_covers_takes_a_fraction() -> None:
    """covers(fraction=0.9) asks for 90% of the window."""
    got = aggregate(0.0, 250.0, [1.0])
    assert got.covers(0.0, 300.0, fraction=0.8)
    assert not got.covers(0.0, 300.0, fraction=0.9)


def test_percentile_helper_matches_nearest_rank() -> None:
    """percentile() never indexes below zero and picks int(n*p)-1."""
    assert percentile([1.0], 0.01) == 1.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 1.0) == 4.0
