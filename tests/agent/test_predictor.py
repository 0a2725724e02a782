"""The peak predictor: cold start, persistence, corrupt checkpoints, clock jumps, vanished pods."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from agent import peak, predictor
from kube import classify, quantity
from metriccache import MetricCache, Sample, kinds
from metriccache import histogram as hist
from tests.agent.builders import T0, FakeClock

PROD, BATCH = classify.PriorityClass.PROD, classify.PriorityClass.BATCH
MIN = 60.0
GIB = 1 << 30
CONFIG = predictor.PredictorConfig(cold_start=30 * MIN, training_interval=MIN)
USAGE = predictor.Usage(cpu=1.0, memory=float(GIB))


def _train(p: predictor.PeakPredictor, start: float, minutes: int, **pods: float) -> float:
    """Train once a minute for `minutes` with Prod pods at the given CPU cores; the last time."""
    t = start
    for i in range(minutes):
        t = start + i * MIN
        usage = {uid: (PROD, predictor.Usage(cpu, float(GIB))) for uid, cpu in pods.items()}
        p.train(t, usage, predictor.Usage(0.2, float(GIB // 4)), on_node=pods)
    return t


def _pod(uid: str, cpu: int = 4000, memory: int = 4 * GIB) -> peak.PodInput:
    return peak.PodInput(uid=uid, priority=PROD, cpu_request=cpu, memory_request=memory)


ALLOC = quantity.Resources({quantity.CPU: 16000, quantity.MEMORY: 32 * GIB})


def test_nothing_is_predicted_during_the_cold_start() -> None:
    """A histogram observed for less than the cold start predicts nothing; nothing is reclaimed."""
    p = predictor.PeakPredictor(CONFIG)
    _train(p, T0, 30, a=1.0)  # 29 minutes observed
    assert p.observed("a") == 29 * MIN
    assert p.prediction("a") is None
    result = p.reclaimable([_pod("a")], ALLOC)
    assert not result.warm
    assert result.reclaimable == {"cpu": 0, "memory": 0}
    assert result.peak == {"cpu": 4000, "memory": 4 * GIB}  # the request counts as the peak


def test_a_warm_predictor_reclaims_request_minus_peak() -> None:
    """After the cold start: request - p95 x 1.1 (CPU), request - p98 x 1.1 (memory)."""
    p = predictor.PeakPredictor(CONFIG)
    _train(p, T0, 40, a=1.0)
    found = p.prediction("a")
    assert found is not None
    # 1 core falls in the bucket ending at the first bucket start above 1.0
    cpu_end = predictor.CPU_BUCKETS.start(predictor.CPU_BUCKETS.find(1.0) + 1)
    assert found.cpu_milli == int(cpu_end * 1000)
    result = p.reclaimable([_pod("a")], ALLOC)
    assert result.warm
    peak_cpu = int(found.cpu_milli * 1.1)
    assert result.by_pod["cpu"] == 4000 - peak_cpu
    assert 0 < result.reclaimable["cpu"] <= 4000 - peak_cpu
    assert 0 < result.reclaimable["memory"] < 3 * GIB


def test_a_burst_raises_the_prediction() -> None:
    """Samples at 3 cores in more than 5% of the minutes move the p95 up to them."""
    p = predictor.PeakPredictor(CONFIG)
    t = _train(p, T0, 40, a=1.0)
    before = p.prediction("a")
    _train(p, t + MIN, 5, a=3.0)
    after = p.prediction("a")
    assert before is not None and after is not None
    assert after.cpu_milli >= 3000 > before.cpu_milli


def test_histograms_survive_a_restart(tmp_path: Path) -> None:
    """Checkpoints in the metric cache file bring back the same predictions and cold-start clock."""
    path = tmp_path / "cache.db"
    clock = FakeClock(wall=T0)
    with MetricCache.open(path, clock=clock.time, flush_interval=None) as cache:
        p = predictor.PeakPredictor(CONFIG, cache)
        t = _train(p, T0, 40, a=1.0, b=0.5)
        assert p.checkpoint(t, force=True) == 2 + 3  # two pods, Prod, no-class, system
        want = {item: p.prediction(item) for item in p.items()}
    with MetricCache.open(path, clock=clock.time, flush_interval=None) as cache:
        again = predictor.PeakPredictor(CONFIG, cache)
        assert again.restore(t + MIN) == 5
        assert {item: again.prediction(item) for item in again.items()} == want
        assert again.observed("a") == 39 * MIN


def test_checkpoints_wait_for_their_interval() -> None:
    """Only changed models are saved, and at most once per checkpoint interval."""
    cache = MetricCache()
    p = predictor.PeakPredictor(CONFIG, cache)
    p.restore(T0)
    _train(p, T0, 1, a=1.0)
    assert p.checkpoint(T0 + MIN) == 0  # not due: restored at T0, interval 10 minutes
    assert p.checkpoint(T0 + 10 * MIN) == 4
    assert p.checkpoint(T0 + 20 * MIN) == 0  # nothing changed since
    assert cache.kv_keys(predictor.KV_PREFIX) == [
        "prediction/__node-__",
        "prediction/__node-koord-prod__",
        "prediction/__node-sys__",
        "prediction/a",
    ]


def test_corrupt_and_foreign_checkpoints_are_discarded_with_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Garbage, another version and another layout: dropped, deleted, one warning, cold again."""
    cache = MetricCache()
    p = predictor.PeakPredictor(CONFIG, cache)
    t = _train(p, T0, 40, a=1.0, b=1.0, c=1.0)
    p.checkpoint(t, force=True)
    cache.kv_set("prediction/a", {"version": 1, "cpu": "garbage"})
    newer = cache.kv_get("prediction/b")
    assert isinstance(newer, dict)
    cache.kv_set("prediction/b", {**newer, "version": 99})
    layout = cache.kv_get("prediction/c")
    assert isinstance(layout, dict) and isinstance(layout["cpu"], dict)
    cache.kv_set("prediction/c", {**layout, "cpu": {**layout["cpu"], "layout": "1:2:3:4"}})
    again = predictor.PeakPredictor(CONFIG, cache)
    with caplog.at_level(logging.WARNING, logger="agent.predictor"):
        assert again.restore(t) == 3  # the node items
    assert len(caplog.records) == 1
    assert "discarded 3 prediction checkpoint(s)" in caplog.records[0].getMessage()
    assert "cold start begins again" in caplog.records[0].getMessage()
    assert [again.prediction(uid) for uid in "abc"] == [None, None, None]
    assert not {"prediction/a", "prediction/b", "prediction/c"} & set(cache.kv_keys())


def test_a_checkpoint_from_the_future_is_discarded(caplog: pytest.LogCaptureFixture) -> None:
    """The clock went back across a restart: samples stamped later than now are not used."""
    cache = MetricCache()
    p = predictor.PeakPredictor(CONFIG, cache)
    t = _train(p, T0, 40, a=1.0)
    p.checkpoint(t, force=True)
    again = predictor.PeakPredictor(CONFIG, cache)
    with caplog.at_level(logging.WARNING, logger="agent.predictor"):
        assert again.restore(t - 3600) == 0
    assert "from the future" in caplog.records[0].getMessage()
    assert again.items() == []


def test_a_clock_step_back_discards_the_future(caplog: pytest.LogCaptureFixture) -> None:
    """A step back beyond one training interval starts the cold start again, with one line."""
    p = predictor.PeakPredictor(CONFIG)
    t = _train(p, T0, 40, a=1.0)
    assert p.prediction("a") is not None
    with caplog.at_level(logging.WARNING, logger="agent.predictor"):
        _train(p, t - 3600, 1, a=1.0)
    assert len(caplog.records) == 1 and "clock went back" in caplog.records[0].getMessage()
    assert p.prediction("a") is None and p.observed("a") == 0
    assert p.reclaimable([_pod("a")], ALLOC).reclaimable == {"cpu": 0, "memory": 0}


def test_a_small_step_back_keeps_the_history() -> None:
    """NTP stepping the clock back a few seconds neither resets nor adds observed time."""
    p = predictor.PeakPredictor(CONFIG)
    t = _train(p, T0, 40, a=1.0)
    observed = p.observed("a")
    _train(p, t - 5, 1, a=1.0)
    assert p.observed("a") == observed and p.prediction("a") is not None


def test_a_clock_step_forward_cannot_end_the_cold_start() -> None:
    """A jump of a day counts as two training intervals of observation."""
    p = predictor.PeakPredictor(CONFIG)
    t = _train(p, T0, 2, a=1.0)
    _train(p, t + 86400, 1, a=1.0)
    assert p.observed("a") == MIN + 2 * MIN
    assert p.prediction("a") is None


def test_a_vanished_pod_takes_its_histogram_and_checkpoint_with_it() -> None:
    """Once the pod is no longer on the node, its model and its kv key are gone."""
    cache = MetricCache()
    p = predictor.PeakPredictor(CONFIG, cache)
    t = _train(p, T0, 3, a=1.0, b=1.0)
    p.checkpoint(t, force=True)
    assert "prediction/b" in cache.kv_keys()
    _train(p, t + MIN, 1, a=1.0)
    assert "b" not in p.items() and "a" in p.items()
    assert "prediction/b" not in cache.kv_keys()


def test_non_prod_pods_have_no_histogram() -> None:
    """A Batch pod is neither modelled nor summed into the Prod class."""
    p = predictor.PeakPredictor(CONFIG)
    p.train(T0, {"x": (BATCH, USAGE)}, None, on_node=["x"])
    assert p.items() == ["__node-__", "__node-koord-prod__"]


def _samples(uid: str, start: float, end: float, cpu: float) -> list[Sample]:
    out = []
    t = start
    while t <= end:
        out.append(Sample(kinds.POD_CPU_USAGE, {"pod_uid": uid}, t, cpu))
        out.append(Sample(kinds.POD_MEMORY_USAGE, {"pod_uid": uid}, t, float(GIB)))
        out.append(Sample(kinds.SYSTEM_CPU_USAGE, {}, t, 0.1))
        out.append(Sample(kinds.SYSTEM_MEMORY_USAGE, {}, t, float(GIB)))
        t += 10
    return out


def test_the_loop_trains_from_the_metric_cache_once_per_interval() -> None:
    """After rounds: the first starts the interval, then one training per interval, none unsynced."""
    clock = FakeClock(wall=T0)
    cache = MetricCache(clock=clock.time)
    p = predictor.PeakPredictor(CONFIG, cache)
    synced: dict[str, classify.PriorityClass] | None = None
    loop = predictor.PredictionLoop(p, cache, lambda: synced, clock.time, clock.monotonic)
    assert not loop.after_round()  # starts the interval
    cache.append(_samples("a", T0, T0 + MIN, 1.5))
    clock.advance(MIN)
    assert not loop.after_round()  # not synced: classes unknown
    assert p.items() == []
    synced = {"a": PROD}
    clock.advance(MIN)
    cache.append(_samples("a", T0 + MIN, T0 + 2 * MIN, 1.5))
    assert loop.after_round()
    clock.advance(10)
    assert not loop.after_round()  # within the interval
    assert set(p.items()) == {"a", "__node-__", "__node-koord-prod__", "__node-sys__"}


def test_histogram_checkpoint_refuses_non_numbers() -> None:
    """A checkpoint's total and reference must be finite numbers."""
    raw = hist.DecayingHistogram(predictor.CPU_BUCKETS, 3600).to_checkpoint()
    for bad in ({"total": "1"}, {"reference": float("nan")}, {"buckets": {"x": 1}}):
        with pytest.raises(hist.CheckpointError):
            hist.DecayingHistogram.from_checkpoint({**raw, **bad}, predictor.CPU_BUCKETS, 3600)
