"""Benchmark of the metric cache: one node, 250 pods x 6 kinds at 1 Hz.

Run with `python -m bench metriccache` (not as a script: this module's name
would shadow the `metriccache` package). Writes metriccache.json (see bench/__init__.py).

The scenario: every simulated second the collectors append one batch of
250 pods x (pod cpu, pod memory, pod throttled ratio, container cpu,
container memory, container throttled ratio) plus node and system cpu and
memory: 1,504 samples. The clock is simulated, so 30 minutes take seconds;
the flusher thread is off and the benchmark flushes every 5 simulated seconds
and prunes every 60 itself, inside the timed region, as the thread would.

Measurements and targets (from the metriccache issue):
- ingest rate: samples / time spent in append + flush + prune, >= 100,000/s;
- the queries behind one NodeMetric report: node cpu and memory over
  5m/10m/30m (each giving avg/p50/p90/p95/p99) plus the 5-minute aggregates of
  cpu and memory for all 250 pods; median of 30 runs, <= 50 ms;
- resident memory growth of the process after 30 simulated minutes, <= 50 MiB;
- restart recovery: open the file and answer the first 5-minute queries, after
  a clean close and from a crash image (files copied while open, unflushed
  WAL included, as a kill -9 leaves them); the worse of the two, <= 1 s.
"""

from __future__ import annotations

import gc
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from bench import write_results
from metriccache import MetricCache, Sample, kinds

PODS = 250
SIM_SECONDS = 30 * 60
FLUSH_EVERY = 5
PRUNE_EVERY = 60
QUERY_RUNS = 30
T_START = 1_700_000_000.0
MIB = 1 << 20

POD_KINDS = (kinds.POD_CPU_USAGE, kinds.POD_MEMORY_USAGE, kinds.POD_CPU_THROTTLED_RATIO)
CONTAINER_KINDS = (
    kinds.CONTAINER_CPU_USAGE,
    kinds.CONTAINER_MEMORY_USAGE,
    kinds.CONTAINER_CPU_THROTTLED_RATIO,
)
NODE_KINDS = (
    kinds.NODE_CPU_USAGE,
    kinds.NODE_MEMORY_USAGE,
    kinds.SYSTEM_CPU_USAGE,
    kinds.SYSTEM_MEMORY_USAGE,
)


class SimClock:
    """The simulated wall clock handed to the cache."""

    def __init__(self) -> None:
        self.now = T_START

    def __call__(self) -> float:
        return self.now


def _labels() -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    uids = [f"{p:08x}-0000-4000-8000-{p:012x}" for p in range(PODS)]
    pods = [{"pod_uid": uid} for uid in uids]
    containers = [
        {"pod_uid": uid, "container_id": f"containerd://{p:064x}"} for p, uid in enumerate(uids)
    ]
    return pods, containers


def _batch(t: float, pods: list[dict[str, str]], containers: list[dict[str, str]]) -> list[Sample]:
    """One collection round; values vary so percentiles have work to do."""
    tick = int(t)
    out = [Sample(kind, {}, t, 1.0 + (tick * 7 + i) % 13) for i, kind in enumerate(NODE_KINDS)]
    for p in range(PODS):
        wobble = (tick * 31 + p * 17) % 100 / 100
        out.append(Sample(kinds.POD_CPU_USAGE, pods[p], t, 0.1 + wobble))
        out.append(Sample(kinds.POD_MEMORY_USAGE, pods[p], t, 1e8 + wobble * 1e7))
        out.append(Sample(kinds.POD_CPU_THROTTLED_RATIO, pods[p], t, wobble / 10))
        out.append(Sample(kinds.CONTAINER_CPU_USAGE, containers[p], t, 0.1 + wobble))
        out.append(Sample(kinds.CONTAINER_MEMORY_USAGE, containers[p], t, 1e8 + wobble * 1e7))
        out.append(Sample(kinds.CONTAINER_CPU_THROTTLED_RATIO, containers[p], t, wobble / 10))
    return out


def _rss() -> int:
    gc.collect()
    return int(psutil.Process().memory_info().rss)


def _report_queries(cache: MetricCache, now: float) -> tuple[int, int]:
    """The queries of one NodeMetric report; returns (node aggregates, pod aggregates)."""
    node = 0
    for window in (300, 600, 1800):
        for kind in (kinds.NODE_CPU_USAGE, kinds.NODE_MEMORY_USAGE):
            agg = cache.aggregate(kind, {}, now - window, now)
            if agg is not None and agg.covers(now - window, now):
                node += 1
    cpu = cache.aggregate_all(kinds.POD_CPU_USAGE, {}, now - 300, now)
    memory = cache.aggregate_all(kinds.POD_MEMORY_USAGE, {}, now - 300, now)
    return node, len(cpu) + len(memory)


def _simulate(cache: MetricCache, clock: SimClock) -> dict[str, Any]:
    pods, containers = _labels()
    ingest = build = 0.0
    samples = 0
    perf = time.perf_counter
    for second in range(SIM_SECONDS):
        clock.now = T_START + second
        t0 = perf()
        batch = _batch(clock.now, pods, containers)
        t1 = perf()
        cache.append(batch)
        if second % FLUSH_EVERY == FLUSH_EVERY - 1:
            cache.flush()
        if second % PRUNE_EVERY == PRUNE_EVERY - 1:
            cache.prune()
        ingest += perf() - t1
        build += t1 - t0
        samples += len(batch)
    return {"samples": samples, "ingest_seconds": ingest, "build_seconds": build}


def _timed_open(path: Path, clock: SimClock) -> tuple[float, MetricCache]:
    t0 = time.perf_counter()
    cache = MetricCache.open(path, clock=clock, flush_interval=None)
    node, pods = _report_queries(cache, clock.now)
    elapsed = time.perf_counter() - t0
    if (node, pods) != (6, 2 * PODS):
        raise AssertionError(f"aggregates missing after restart: node {node}, pods {pods}")
    return elapsed, cache


def _verdict(value: float, target: float, unit: str, *, higher_is_better: bool) -> dict[str, Any]:
    ok = value >= target if higher_is_better else value <= target
    return {
        "value": round(value, 3),
        "unit": unit,
        "target": f"{'>=' if higher_is_better else '<='} {target:g}",
        "pass": ok,
    }


def run(workdir: Path) -> dict[str, Any]:
    """All four measurements in `workdir`; returns the results document."""
    path = workdir / "metrics.db"
    clock = SimClock()
    rss_before = _rss()
    cache = MetricCache.open(path, clock=clock, flush_interval=None)
    sim = _simulate(cache, clock)
    rss_after = _rss()
    stats = cache.stats()

    now = clock.now
    if _report_queries(cache, now) != (6, 2 * PODS):
        raise AssertionError("the NodeMetric report queries did not find every series")
    timings = []
    for _ in range(QUERY_RUNS):
        t0 = time.perf_counter()
        _report_queries(cache, now)
        timings.append((time.perf_counter() - t0) * 1000)

    # A crash image: what is on disk while the process runs, WAL included.
    cache.append(_batch(now + 0.5, *_labels()))
    cache.flush()
    expected = cache.aggregate(kinds.NODE_CPU_USAGE, {}, now - 300, now + 1)
    crash = workdir / "crash"
    crash.mkdir()
    for file in workdir.glob("metrics.db*"):
        shutil.copy(file, crash / file.name)
    t0 = time.perf_counter()
    cache.close()
    close_seconds = time.perf_counter() - t0
    file_bytes = path.stat().st_size

    clean_seconds, reopened = _timed_open(path, clock)
    if reopened.aggregate(kinds.NODE_CPU_USAGE, {}, now - 300, now + 1) != expected:
        raise AssertionError("5-minute node aggregate changed across the restart")
    reopened.close()
    crash_seconds, recovered = _timed_open(crash / "metrics.db", clock)
    recovered.close()

    rate = sim["samples"] / sim["ingest_seconds"]
    growth = (rss_after - rss_before) / MIB
    median = statistics.median(timings)
    restart = max(clean_seconds, crash_seconds)
    results = {
        "ingest_rate": _verdict(rate, 100_000, "samples/s", higher_is_better=True)
        | {
            "samples": sim["samples"],
            "append_flush_prune_seconds": round(sim["ingest_seconds"], 3),
            "including_sample_construction_per_s": round(
                sim["samples"] / (sim["ingest_seconds"] + sim["build_seconds"])
            ),
        },
        "nodemetric_report_queries": _verdict(median, 50, "ms", higher_is_better=False)
        | {
            "statistic": f"median of {QUERY_RUNS}",
            "max_ms": round(max(timings), 3),
            "queries": "6 node aggregates (cpu, memory x 5m/10m/30m) + 2 x 250 pod 5m aggregates",
        },
        "rss_growth_30min": _verdict(growth, 50, "MiB", higher_is_better=False)
        | {
            "rss_before_bytes": rss_before,
            "rss_after_bytes": rss_after,
            "series": stats.series,
            "samples_in_memory": stats.samples,
            "stated_worst_case_bound_bytes": cache.memory_bound_bytes(),
        },
        "restart_recovery": _verdict(restart, 1.0, "s", higher_is_better=False)
        | {
            "clean_close_open_seconds": round(clean_seconds, 3),
            "crash_image_open_seconds": round(crash_seconds, 3),
            "close_seconds": round(close_seconds, 3),
            "file_bytes": file_bytes,
            "includes": "open + load + first NodeMetric report queries",
        },
    }
    return {
        "scenario": {
            "pods": PODS,
            "series": stats.series,
            "samples_per_second": sim["samples"] // SIM_SECONDS,
            "simulated_seconds": SIM_SECONDS,
            "flush_every_simulated_seconds": FLUSH_EVERY,
            "prune_every_simulated_seconds": PRUNE_EVERY,
            "retention_seconds": {
                "node": kinds.NODE_CPU_USAGE.retention_seconds,
                "pod": kinds.POD_CPU_USAGE.retention_seconds,
            },
        },
        "results": results,
        "pass": all(r["pass"] for r in results.values()),
    }


def main() -> int:
    """Run the benchmark, write metriccache.json, print a summary."""
    with tempfile.TemporaryDirectory(prefix="nodeqos-bench-metriccache-") as tmp:
        document = run(Path(tmp))
    path = write_results("metriccache", document)
    for name, result in document["results"].items():
        mark = "ok  " if result["pass"] else "MISS"
        print(f"{mark} {name}: {result['value']} {result['unit']} (target {result['target']})")
    print(f"wrote {path}")
    return 0 if document["pass"] else 1
