"""The agent's assembly, shared by both modes: the collection half and its server.

`assemble` builds the collection half from an `AgentConfig` and the registry
`main` made: the cgroup hierarchy (detected, `open_cgroups`), /proc, the metric
cache, pod discovery (by default by scanning kubepods), the collectors and
their runner. `serve` starts `/metrics` + `/healthz`, `collect` runs the rounds
on the deadline schedule until stopped (or for `--run-for`), and
`print_status` writes the NodeMetric status the agent would publish as YAML.

The two modes are thin layers on top: `agent.standalone` (no cluster, pods
found by scanning kubepods) and `agent.cluster` (the states informer's pods as
the `PodSource`, plus the reporter and the QoS plugins). Tests and
`bench/agent_collect.py` build an agent through `assemble` too.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TextIO

from prometheus_client import CollectorRegistry

import cgroups
from agent import collectors, discovery, features, health, nodemetric, telemetry
from agent import kinds as agent_kinds
from agent.collection import Collection
from agent.config import AgentConfig, NodeUsageSource
from agent.schedule import Clock, Ticker
from agent.server import MetricsServer
from kube import slo
from metriccache import MetricCache, MetricCacheError

log = logging.getLogger(__name__)

# metriccache keeps up to retention x rate samples per series; leave headroom
# over the collection rate so jitter never sheds samples.
_RATE_HEADROOM = 1.25


class ConfigError(ValueError):
    """A flag value the machine does not accept; `flag` names it for the CLI."""

    def __init__(self, flag: str, message: str) -> None:
        super().__init__(message)
        self.flag = flag


def open_cgroups(
    root: Path, driver: str, kubelet_root: PurePosixPath = cgroups.DEFAULT_KUBELET_ROOT
) -> cgroups.CgroupFS:
    """Detect the hierarchy at `root`; `driver` "auto" keeps the detected driver;
    `kubelet_root` is the kubelet's cgroupRoot relative to the hierarchy."""
    if not root.is_dir():
        raise ConfigError("--cgroup-root", f"{root} is not a directory")
    try:
        detected = cgroups.detect(root, kubelet_root)
    except cgroups.CgroupError as err:
        raise ConfigError("--cgroup-root", str(err)) from err
    if driver == "auto":
        return detected
    return cgroups.CgroupFS(
        root=root,
        version=detected.version,
        driver=cgroups.Driver(driver),
        kubelet_root=kubelet_root,
    )


def check_kubepods_readable(fs: cgroups.CgroupFS) -> None:
    """`--node-usage-source=kubepods` needs the kubelet's pod cgroup; say which flag to fix."""
    kubepods = fs.kubepods_root()
    try:
        cgroups.read_cpu_usage(fs, kubepods)
        cgroups.read_memory_stat(fs, kubepods)
    except cgroups.CgroupError as err:
        raise ConfigError(
            "--node-usage-source",
            f"kubepods: cannot read the kubelet's pod cgroup {kubepods} ({err}); set "
            "--kubelet-cgroup-root to the kubelet's cgroupRoot, or use "
            "--node-usage-source=proc",
        ) from err


@dataclass(frozen=True, slots=True)
class Agent:
    """The assembled parts, for both modes and for benchmarks that drive rounds themselves."""

    fs: cgroups.CgroupFS
    cache: MetricCache
    reader: collectors.FileReader
    source: discovery.PodSource
    collection: Collection
    metrics: telemetry.AgentMetrics
    readiness: health.Readiness

    def close(self) -> None:
        """Release the open cgroup files and close the metric cache (flushing it)."""
        self.reader.close()
        self.cache.close()


def assemble(
    config: AgentConfig,
    registry: CollectorRegistry,
    clock: Clock,
    *,
    flush_interval: float | None = 5.0,
    fs: cgroups.CgroupFS | None = None,
    source: discovery.PodSource | None = None,
    readiness: health.Readiness | None = None,
) -> Agent:
    """Build the collection half; `ConfigError` names a flag the host rejects.

    `fs` is the detected hierarchy when the caller already opened it;
    `source` None scans kubepods (`StandaloneDiscovery`); `readiness` None
    starts a fresh registry of components.
    """
    if fs is None:
        fs = open_cgroups(config.cgroup_root, config.cgroup_driver, config.kubelet_cgroup_root)
    if not (config.proc_root / "stat").is_file():
        raise ConfigError("--proc-root", f"{config.proc_root} has no stat file; is it a procfs?")
    node_from_pods = config.node_usage_source is NodeUsageSource.KUBEPODS
    if node_from_pods:
        check_kubepods_readable(fs)
    procfs = cgroups.ProcFS(config.proc_root)
    if readiness is None:
        readiness = health.Readiness()
    cache = _open_cache(config, clock, readiness, flush_interval=flush_interval)
    metrics = telemetry.AgentMetrics(registry)
    registry.register(
        telemetry.NodeUsageCollector(cache, clock, max_age=max(5.0, 3 * config.collect_interval))
    )
    if source is None:
        source = discovery.StandaloneDiscovery(fs, rescan_every=config.rescan_every)
    reader = collectors.FileReader()
    found = collectors.build_collectors(
        fs,
        procfs,
        source,
        metrics.errors,
        reader,
        pod_psi=config.feature_gates.enabled(features.PSI_COLLECTOR),
        node_from_pods=node_from_pods,
    )
    collection = Collection(found, cache, clock, metrics, readiness)
    log.info(
        "cgroup %s (%s driver) at %s; node usage from %s; collecting every %gs into %s",
        fs.version.value,
        fs.driver.value,
        fs.root,
        f"the {fs.kubepods_root()} cgroup" if node_from_pods else config.proc_root,
        config.collect_interval,
        config.metric_cache_path,
    )
    return Agent(fs, cache, reader, source, collection, metrics, readiness)


def _open_cache(
    config: AgentConfig,
    clock: Clock,
    readiness: health.Readiness,
    *,
    flush_interval: float | None,
) -> MetricCache:
    """The metric cache at --metric-cache-path, its readiness on `/healthz`."""
    cache_ready = readiness.register("metriccache", "opening")
    try:
        cache = MetricCache.open(
            config.metric_cache_path,
            kinds=agent_kinds.registry(),
            clock=clock.time,
            flush_interval=flush_interval,
            max_sample_rate_hz=max(1.25, _RATE_HEADROOM / config.collect_interval),
        )
    except MetricCacheError as err:
        raise ConfigError("--metric-cache-path", str(err)) from err
    cache_ready.set(True, f"open at {config.metric_cache_path}")
    return cache


def serve(
    config: AgentConfig, registry: CollectorRegistry, readiness: health.Readiness
) -> MetricsServer | None:
    """Start `/metrics` + `/healthz` on `--metrics-addr` (None when it is "")."""
    addr = config.metrics_addr
    if addr is None:
        return None
    try:
        server = MetricsServer(addr.host, addr.port, registry, readiness)
    except OSError as err:
        raise ConfigError("--metrics-addr", f"cannot listen on {addr}: {err}") from err
    host, port = server.address
    log.info("serving /metrics and /healthz on %s:%d", host, port)
    return server


def print_status(
    agent: Agent,
    now: float,
    out: TextIO,
    policy: slo.NodeMetricCollectPolicy | None = None,
) -> None:
    """Write the NodeMetric status the agent would publish now, as YAML."""
    import yaml  # only for this once-per-run print: 0.8 MiB the running agent need not hold

    status = nodemetric.build_status(agent.cache, agent.source.pod_metas(), now, policy)
    out.write(yaml.safe_dump(status.to_api(), sort_keys=False))
    out.flush()


def collect(
    agent: Agent,
    config: AgentConfig,
    clock: Clock,
    stop: threading.Event,
    after_round: Callable[[], object] | None = None,
) -> None:
    """Run collection rounds on the deadline schedule until `stop` or `--run-for`.

    `after_round` runs after each round (the peak predictor's training).
    """
    ticker = Ticker(config.collect_interval, clock, stop.wait, on_missed=agent.metrics.missed)

    def round_then_hook() -> object:
        rnd = agent.collection.run_round()
        if after_round is not None:
            after_round()
        return rnd

    stats = ticker.run(round_then_hook, duration=config.run_for)
    log.info("collected %d rounds (%d ticks missed)", stats.rounds, stats.missed)
