"""The peers benchmark's steady cycle in memory, for profiling (not a benchmark of its own).

`python -m bench._peerscycle [--nodes 5000] [--cycles 3] [--profile]` builds the
cluster `python -m bench peers` loads into the API server (bench/lownodeload.py's
seeded generator, every `peers.TAINT_EVERY`-th node tainted) as a StaticSource,
and runs `Runner.run_once` with the same DeschedulerPolicy (`peers.POLICY`, dry
run) several times in one Runner, as the daemon does between its cycles. It
prints each cycle's wall and CPU seconds, the plugins' share (their duration
histogram), the evictions per plugin, and with `--profile` a cProfile of one
more cycle. Decision log lines go to /dev/null, as costly as to a pipe.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import gc
import logging
import os
import pstats
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from prometheus_client import CollectorRegistry

from bench import lownodeload, peers
from descheduler import config, framework, plugins


def peers_objects(nodes: int) -> Iterator[dict[str, Any]]:
    """The generated cluster with the peers benchmark's taints."""
    for obj in lownodeload.cluster_objects(nodes):
        if (
            obj["kind"] == "Node"
            and int(obj["metadata"]["name"].split("-")[1]) % peers.TAINT_EVERY == 0
        ):
            obj["spec"]["taints"] = [peers.TAINT]
        yield obj


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench._peerscycle")
    parser.add_argument("--nodes", type=int, default=lownodeload.LARGE[0])
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=open(os.devnull, "w"))  # noqa: SIM115
    started = time.perf_counter()
    source = framework.StaticSource.from_objects(peers_objects(args.nodes))
    print(f"built {args.nodes} nodes in {time.perf_counter() - started:.1f}s", flush=True)
    registry = plugins.registry()
    cfg = config.decode_configuration({**peers.POLICY, "dryRun": True}, plugins=registry.catalog())
    metrics = CollectorRegistry()
    runner = framework.Runner.from_config(
        cfg,
        registry,
        source=source,
        backend=lownodeload.NoOpBackend(),
        metrics=framework.Metrics(metrics),
        clock=lambda: lownodeload.NOW + timedelta(seconds=30),
    )
    report = None
    for cycle in range(args.cycles):
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        report = runner.run_once()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(f"cycle {cycle + 1}: {wall:.3f}s wall, {cpu:.3f}s CPU", flush=True)
    assert report is not None
    for family in metrics.collect():
        for sample in family.samples:
            if sample.name == "nodeqos_descheduler_plugin_duration_seconds_sum":
                mean = sample.value / args.cycles
                print(f"  {sample.labels['plugin']}: {mean:.3f}s a cycle (wall)")
    evicted = collections.Counter(e.plugin for e in report.evictions)
    print(f"evicted {dict(sorted(evicted.items()))}, passed over {len(report.skipped)}")
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(runner.run_once)
        pstats.Stats(profile).sort_stats("cumulative").print_stats(30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
