"""The in-cluster agent: collection, states informer, NodeMetric reporter, QoS plugins.

`run` is what `nodeqos-agent` does without `--standalone`. It composes:

- the API client (`--kubeconfig`, else the pod's in-cluster credentials);
- `agent.states.States`: the Node, Pods, NodeSLO and NodeMetric informers;
- the collection half, assembled by `agent.assembly.assemble` exactly as in
  standalone mode except for its `PodSource`: `discovery.ClusterDiscovery`
  over the informer's pods;
- the peak predictor (`agent.predictor`): restored from the metric cache,
  trained after collection rounds, its `prodReclaimableMetric` written by
  the reporter, checkpointed into the metric cache when the agent stops;
- the NodeMetric reporter (`agent.reporter`) in its own thread;
- the QoS manager (`qosmanager.Manager`) over the plugin registry the CLI
  built (every built-in strategy, configured by its flags and gated by the
  same `--feature-gates`, plus any extension plugin, gated by
  `--qos-extension-plugins`); the built-ins are bound here to a handle writing
  only through its executor under `--cgroup-root` (and `<--proc-root>/sys` for
  sysctls), evicting through the Eviction API with Events;
- `/metrics` and `/healthz`, where each of these reports its own readiness.

Nothing waits for anything else: collection starts at once (pods appear as
the informer lists them), the reporter retries on its own schedule, and only
the QoS plugins wait - for the Node and Pods informers' first list, which they
cannot act without; while they wait, `/healthz` says so in the `qosmanager`
line. Stopping (`stop`, set on SIGTERM) ends the collection loop; then the
reporter, the plugins and the informers stop, and the metric cache is flushed
and closed.
"""

from __future__ import annotations

import logging
import math
import threading
from typing import TextIO

from prometheus_client import CollectorRegistry

import cgroups
import qosmanager
from agent import assembly, discovery, health, peak, predictor, reporter, telemetry
from agent import states as agent_states
from agent.config import AgentConfig
from agent.schedule import Clock, SystemClock
from agent.server import MetricsServer
from kube import classify, events, quantity, rest, serverversion, slo
from metriccache import MetricCache

log = logging.getLogger(__name__)

COMPONENT = "nodeqos-agent"  # the Events' source component
# koordlet's --kube-api-qps / --kube-api-burst defaults.
API_QPS = 20.0
API_BURST = 30
API_TIMEOUT = 10.0  # seconds; an unanswered request must not hold a loop for long
_JOIN_TIMEOUT = 15.0


def connect(config: AgentConfig) -> rest.Rest:
    """The API client from `--kubeconfig`, else in-cluster; `ConfigError` when neither works
    or the API server is older than nodeqos supports (`kube.serverversion`)."""
    try:
        client = rest.Rest.from_kubeconfig(
            config.kubeconfig, qps=API_QPS, burst=API_BURST, timeout=API_TIMEOUT
        )
    except Exception as err:
        # kubernetes.config raises ConfigException, OSError or ValueError here,
        # depending on what is missing or malformed; all mean "no credentials".
        where = config.kubeconfig or "the in-cluster service account or ~/.kube/config"
        raise assembly.ConfigError(
            "--kubeconfig", f"cannot load API credentials from {where}: {err}"
        ) from err
    try:
        serverversion.check(client, COMPONENT)
    except serverversion.UnsupportedServer as err:
        raise assembly.ConfigError("--kubeconfig", str(err)) from None
    return client


def qos_manager(
    config: AgentConfig,
    client: rest.Rest,
    recorder: events.Recorder,
    fs: cgroups.CgroupFS,
    registry: CollectorRegistry,
    readiness: health.Readiness,
    plugins: qosmanager.PluginRegistry,
    extension_gates: qosmanager.GateSet,
) -> qosmanager.Manager:
    """The QoS manager running `plugins`, its built-ins bound to this node's handle."""
    metrics = qosmanager.QoSMetrics(registry)
    executor = qosmanager.ResourceExecutor(
        fs, metrics=metrics, sysctl_root=config.proc_root / "sys"
    )
    evictor = qosmanager.Evictor(qosmanager.KubeEvictionAPI(client, recorder), metrics=metrics)
    handle = qosmanager.Handle(
        fs=fs,
        executor=executor,
        evictor=evictor,
        metrics=metrics,
        collect_interval=config.collect_interval,
    )
    qosmanager.bind_handle(plugins, handle)
    return qosmanager.Manager(
        plugins,
        builtin_gates=config.feature_gates,
        extension_gates=extension_gates,
        health=health.ComponentHealth(readiness),
        metrics=metrics,
        # The plugins must not act on a node whose pods they do not know; they
        # wait for the first list however long the API server takes, visibly
        # on /healthz, while everything else runs (no global barrier).
        sync_timeout=math.inf,
    )


def run(
    config: AgentConfig,
    registry: CollectorRegistry,
    *,
    plugins: qosmanager.PluginRegistry,
    extension_gates: qosmanager.GateSet,
    stop: threading.Event,
    out: TextIO,
    clock: Clock | None = None,
) -> None:
    """Run the in-cluster agent until `stop` is set or `config.run_for` has passed.

    `plugins` is the QoS plugin registry whose flags the CLI parsed
    (`qosmanager.builtin_registry()`, unbound, plus any extension plugin);
    `extension_gates` is its `extension_gates(--qos-extension-plugins)`.
    """
    clock = clock or SystemClock()
    client = connect(config)
    fs = assembly.open_cgroups(config.cgroup_root, config.cgroup_driver, config.kubelet_cgroup_root)
    readiness = health.Readiness()
    # Events are written off the callers' threads (the evictor, the NodeSLO reader).
    recorder = events.Broadcaster(
        client,
        COMPONENT,
        config.node_name,
        registry=registry,
        dropped_metric="nodeqos_agent_events_dropped_total",
    )
    states = agent_states.States(
        client, config.node_name, fs.driver, readiness, recorder, kubelet_root=fs.kubelet_root
    )
    source = discovery.ClusterDiscovery(fs, states, retry_every=config.rescan_every)
    registry.register(telemetry.NodeSLOCollector(states.node_slo))
    agent = assembly.assemble(config, registry, clock, fs=fs, source=source, readiness=readiness)
    server: MetricsServer | None = None
    manager: qosmanager.Manager | None = None
    threads: list[threading.Thread] = []
    peaks, training = _peak_predictor(config, agent.cache, states, registry, clock)
    try:
        server = assembly.serve(config, registry, readiness)
        states.start()
        threads.append(
            _reporter_thread(
                client, config, agent.cache, source, states, registry, readiness, peaks, clock, stop
            )
        )
        manager = qos_manager(
            config, client, recorder, fs, registry, readiness, plugins, extension_gates
        )
        manager.setup_all(client, agent.cache, states)
        manager.start(stop)
        for thread in threads:
            thread.start()
        log.info(
            "in-cluster on node %s; QoS plugins enabled: %s",
            config.node_name,
            ", ".join(manager.enabled()) or "none",
        )
        assembly.collect(agent, config, clock, stop, after_round=training.after_round)
        if config.print_nodemetric:
            assembly.print_status(agent, clock.time(), out, _policy(states))
    finally:
        stop.set()
        _shut_down(threads, manager, states, server, agent.cache)
        recorder.close()
        _save_predictions(peaks, clock.time())
        agent.close()


def _reporter_thread(
    client: rest.Rest,
    config: AgentConfig,
    cache: MetricCache,
    source: discovery.ClusterDiscovery,
    states: agent_states.States,
    registry: CollectorRegistry,
    readiness: health.Readiness,
    peaks: predictor.PeakPredictor,
    clock: Clock,
    stop: threading.Event,
) -> threading.Thread:
    """The NodeMetric reporter on a thread of its own (not started), ready for `/healthz`
    once it has reported."""
    publisher = reporter.Reporter(
        client,
        config.node_name,
        cache,
        pods=source.pod_metas,
        informer=states,
        metrics=reporter.ReporterMetrics(registry),
        ready=readiness.register("reporter", "no report yet"),
        clock=clock,
        prediction=lambda: prod_prediction(peaks, states, clock.time()),
    )
    return threading.Thread(
        target=publisher.run, args=(stop,), name="nodemetric-reporter", daemon=True
    )


def _peak_predictor(
    config: AgentConfig,
    cache: MetricCache,
    states: agent_states.States,
    registry: CollectorRegistry,
    clock: Clock,
) -> tuple[predictor.PeakPredictor, predictor.PredictionLoop]:
    """The peak predictor, its histograms restored from the metric cache, its training
    loop (run after each collection round) and its gauges on `registry`."""
    peaks = predictor.PeakPredictor(config.prediction, cache)
    restored = peaks.restore(clock.time())
    log.info("peak predictor: %d histogram pair(s) restored from the metric cache", restored)
    training = predictor.PredictionLoop(
        peaks, cache, lambda: pod_classes(states), clock.time, clock.monotonic
    )
    registry.register(
        telemetry.PredictionCollector(lambda: prod_prediction(peaks, states, clock.time()))
    )
    return peaks, training


def pod_classes(states: agent_states.States) -> dict[str, classify.PriorityClass] | None:
    """Every pod on the node by UID with its priority class; None before the first list."""
    if not states.pods_synced:
        return None
    return {meta.uid: discovery.cluster_meta(meta).priority for meta in states.pods()}


_FINISHED = frozenset({"Succeeded", "Failed"})


def pod_inputs(states: agent_states.States, now: float) -> list[peak.PodInput]:
    """The predictor's view of the pods on the node (requests, class, age, terminating)."""
    inputs = []
    for meta in states.pods():
        pod = meta.pod
        created = pod.creation_timestamp
        inputs.append(
            peak.PodInput(
                uid=pod.uid,
                priority=discovery.cluster_meta(meta).priority,
                cpu_request=pod.requests.get(quantity.CPU, 0),
                memory_request=pod.requests.get(quantity.MEMORY, 0),
                age=math.inf if created is None else now - created.timestamp(),
                terminating=pod.deletion_timestamp is not None or pod.phase in _FINISHED,
            )
        )
    return inputs


def prod_prediction(
    peaks: predictor.PeakPredictor, states: agent_states.States, now: float
) -> peak.Reclaimable | None:
    """`prodReclaimableMetric` for the reporter; None until the Node and Pods are listed."""
    node = states.node()
    if node is None or not states.pods_synced:
        return None
    allocatable = node.raw_allocatable or node.allocatable
    return peaks.reclaimable(pod_inputs(states, now), allocatable)


def _save_predictions(peaks: predictor.PeakPredictor, now: float) -> None:
    try:
        saved = peaks.checkpoint(now, force=True)
    except Exception:
        # The cache may refuse (full, disk error): the histograms of the last interval are lost.
        log.exception("could not save the peak predictor's histograms")
        return
    log.info("peak predictor: %d histogram pair(s) saved", saved)


def _policy(states: agent_states.States) -> slo.NodeMetricCollectPolicy | None:
    obj = states.nodemetric()
    try:
        return None if obj is None else reporter.parse_policy(obj)
    except ValueError:
        return None


def _shut_down(
    threads: list[threading.Thread],
    manager: qosmanager.Manager | None,
    states: agent_states.States,
    server: MetricsServer | None,
    cache: MetricCache,
) -> None:
    """Stop what reads the cache before it is closed; `stop` is already set."""
    for thread in threads:
        if thread.is_alive():
            thread.join(_JOIN_TIMEOUT)
            if thread.is_alive():
                log.warning("%s did not stop within %.0fs", thread.name, _JOIN_TIMEOUT)
    if manager is not None:
        manager.wait(_JOIN_TIMEOUT)  # no SyncTimeout: the sync wait has no limit
    states.stop()
    if server is not None:
        server.close()
    stats = cache.stats()
    log.info("stopping; flushing %d pending sample(s) to the metric cache", stats.pending_samples)
