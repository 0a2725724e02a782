"""Small in-memory fakes behind the framework's Protocols, and a harness to run cycles.

    backend = FakeBackend(outcomes={"web-0": eviction.Outcome.PDB_BLOCKED})
    h = harness(policy(balance=["EvictAll"]), registry_with(EvictAll=evict_all),
                StaticSource(nodes=..., pods=...), backend=backend)
    report = h.runner.run_once()
    h.sample("nodeqos_descheduler_pods_evicted_total", result="success", ...)

`StaticSource` (the real one) is the in-memory ClusterSource; `FakeBackend`
stands in for the Eviction API; `MetricsServer` for metrics-server's
metrics.k8s.io (and counts what is asked of it); `ScriptedPlugin` runs a test's function as a
Deschedule/Balance plugin. The per-plugin test modules (and tests/conformance)
run one plugin through `run_plugin` and read `outcome`:

    report = run_plugin("PodLifeTime", {"maxPodLifeTimeSeconds": 60}, pods)
    assert outcome(report) == (["default/p"], [])
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, ClassVar

from prometheus_client import CollectorRegistry

from descheduler import config, features, framework, plugins, usagesources
from descheduler.config import ExtensionPoint, PluginArgs
from descheduler.evictions import EvictOptions
from descheduler.framework import Handle, Snapshot
from kube import eviction, objects, rest
from kube.quantity import Resources
from tests import builders

NOW = builders.T0 + timedelta(days=1)


class FixedClock:
    """An injectable clock that only moves when told."""

    def __init__(self, now: datetime = NOW) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


class MetricsServer:
    """metrics.k8s.io as metrics-server serves it, from tables; records every request.

    `nodes` maps a node to (cpu millis, memory bytes) and `pods` a "namespace/name"
    to the same; `stamp` is every NodeMetrics' timestamp (change it to model a
    scrape). `requests` lists what was asked: ("nodes",), ("pod", "ns/name"),
    ("pods_in", namespace). `failures[kind]` makes every request of that kind
    ("nodes", "pod", "pods_in") raise.
    """

    def __init__(
        self,
        nodes: Mapping[str, tuple[int, int]],
        pods: Mapping[str, tuple[int, int]],
        *,
        stamp: str = "t0",
    ) -> None:
        self.nodes_usage = dict(nodes)
        self.pods_usage = dict(pods)
        self.stamp = stamp
        self.requests: list[tuple[str, ...]] = []
        self.failures: dict[str, Exception] = {}

    def _ask(self, *request: str) -> None:
        self.requests.append(request)
        failure = self.failures.get(request[0])
        if failure is not None:
            raise failure

    def nodes(self) -> dict[str, usagesources.NodeReading]:
        self._ask("nodes")
        return {
            name: usagesources.NodeReading(Resources({"cpu": c, "memory": m}), self.stamp)
            for name, (c, m) in self.nodes_usage.items()
        }

    def pod(self, namespace: str, name: str) -> Resources | None:
        key = f"{namespace}/{name}"
        self._ask("pod", key)
        found = self.pods_usage.get(key)
        return None if found is None else Resources({"cpu": found[0], "memory": found[1]})

    def pods_in(self, namespace: str, names: Collection[str]) -> dict[str, Resources]:
        self._ask("pods_in", namespace)
        return {
            key: Resources({"cpu": c, "memory": m})
            for key, (c, m) in self.pods_usage.items()
            if key.partition("/")[0] == namespace and key.partition("/")[2] in names
        }

    def take_requests(self) -> list[tuple[str, ...]]:
        """The requests since the last call."""
        taken, self.requests = self.requests, []
        return taken


class TimingOutMetricsServer(MetricsServer):
    """A metrics-server whose reads time out, as kube.rest reports it."""

    def __init__(self) -> None:
        super().__init__({}, {})
        self.failures["nodes"] = rest.ApiUnavailable(
            "GET /apis/metrics.k8s.io/v1beta1/nodes: Read timed out"
        )


class FakeBackend:
    """An eviction backend that answers from a table (pod name -> outcome), EVICTED otherwise."""

    name = "FakeBackend"

    def __init__(
        self,
        outcomes: Mapping[str, eviction.Outcome] | None = None,
        observer: Callable[[objects.Pod], None] | None = None,
    ) -> None:
        self.outcomes = dict(outcomes or {})
        self.observer = observer
        self.calls: list[str] = []
        self.options: list[EvictOptions] = []

    def evict(self, pod: objects.Pod, options: EvictOptions) -> eviction.Result:
        self.calls.append(pod.key)
        self.options.append(options)
        if self.observer is not None:
            self.observer(pod)
        outcome = self.outcomes.get(pod.name, eviction.Outcome.EVICTED)
        return eviction.Result(outcome, "" if outcome is eviction.Outcome.EVICTED else "fake")


@dataclass(frozen=True, kw_only=True, slots=True)
class NoArgs(PluginArgs):
    """Args for test plugins: none."""

    KIND: ClassVar[str] = "NoArgs"


Script = Callable[[str, Snapshot, Handle], None]


class ScriptedPlugin:
    """Runs a test function at deschedule and balance."""

    def __init__(self, name: str, handle: Handle, script: Script) -> None:
        self.name = name
        self.handle = handle
        self.script = script

    def deschedule(self, snapshot: Snapshot) -> None:
        self.script(self.name, snapshot, self.handle)

    def balance(self, snapshot: Snapshot) -> None:
        self.script(self.name, snapshot, self.handle)


SCRIPT_POINTS = frozenset({ExtensionPoint.DESCHEDULE, ExtensionPoint.BALANCE})


def registry_with(**scripts: Script) -> framework.Registry:
    """The in-tree registry plus one ScriptedPlugin per keyword."""
    registry = plugins.registry()
    for name, script in scripts.items():

        def build(args: PluginArgs, handle: Handle, n: str = name, s: Script = script) -> Any:
            return ScriptedPlugin(n, handle, s)

        registry.register(name, build, args=NoArgs, extension_points=SCRIPT_POINTS)
    return registry


def evict_all(name: str, snapshot: Snapshot, handle: Handle) -> None:
    """Try to evict every evictable pod, node by node, pod by pod."""
    for node in snapshot.nodes:
        for pod in handle.evictor.evictable(snapshot.pods_on(node.name), plugin=name):
            handle.evictor.evict(pod, plugin=name, reason="test")


def nothing(name: str, snapshot: Snapshot, handle: Handle) -> None:
    """A plugin that decides nothing."""


def policy(
    *,
    deschedule: Iterable[str] = (),
    balance: Iterable[str] = (),
    evictor: Mapping[str, Any] | None = None,
    profiles: list[dict[str, Any]] | None = None,
    **top: Any,
) -> dict[str, Any]:
    """A DeschedulerPolicy (DefaultEvictor at filter and preEvictionFilter by default).

    `top` takes the top-level camelCase fields (dryRun, maxNoOfPodsToEvictPerNode, ...).
    """
    if profiles is None:
        profile: dict[str, Any] = {
            "name": "p1",
            "plugins": {
                "deschedule": {"enabled": list(deschedule)},
                "balance": {"enabled": list(balance)},
            },
        }
        if evictor is not None:
            profile["pluginConfig"] = [{"name": "DefaultEvictor", "args": dict(evictor)}]
        profiles = [profile]
    return {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": profiles,
        **top,
    }


@dataclass
class Harness:
    runner: framework.Runner
    backend: FakeBackend
    source: framework.ClusterSource
    registry: CollectorRegistry
    clock: FixedClock
    metrics: framework.Metrics = field(init=False)

    def sample(self, name: str, **labels: str) -> float:
        """A metric sample's value, 0 when absent."""
        return self.registry.get_sample_value(name, labels) or 0.0


def harness(
    raw: Mapping[str, Any],
    registry: framework.Registry,
    source: framework.ClusterSource,
    *,
    backend: FakeBackend | None = None,
    clock: FixedClock | None = None,
    gates: features.Gates | None = None,
    sources: usagesources.Sources | None = None,
) -> Harness:
    cfg = config.decode_configuration(raw, plugins=registry.catalog())
    metrics_registry = CollectorRegistry()
    metrics = framework.Metrics(metrics_registry)
    backend = backend or FakeBackend()
    clock = clock or FixedClock()
    runner = framework.Runner.from_config(
        cfg,
        registry,
        source=source,
        backend=backend,
        metrics=metrics,
        clock=clock,
        gates=gates,
        sources=sources,
    )
    h = Harness(runner, backend, source, metrics_registry, clock)
    h.metrics = metrics
    return h


def nodes(*names: str, **overrides: Any) -> list[objects.Node]:
    return [builders.make_node(name, **overrides) for name in names]


def plugin_policy(
    name: str,
    args: Mapping[str, Any] | None = None,
    *,
    point: str = "deschedule",
    evictor: Mapping[str, Any] | None = None,
    **top: Any,
) -> dict[str, Any]:
    """A policy with one profile "p1" running plugin `name` at `point` (and DefaultEvictor)."""
    config: list[dict[str, Any]] = [{"name": name, "args": dict(args or {})}]
    if evictor is not None:
        config.append({"name": "DefaultEvictor", "args": dict(evictor)})
    profile = {"name": "p1", "plugins": {point: {"enabled": [name]}}, "pluginConfig": config}
    return policy(profiles=[profile], **top)


def run_plugin(
    name: str,
    args: Mapping[str, Any] | None,
    pods: Iterable[objects.Pod],
    *,
    point: str = "deschedule",
    nodes: Iterable[objects.Node] | None = None,
    evictor: Mapping[str, Any] | None = None,
    backend: FakeBackend | None = None,
    clock: FixedClock | None = None,
    sources: usagesources.Sources | None = None,
    **state_and_top: Any,
) -> framework.CycleReport:
    """One cycle of `plugin_policy(...)` over a StaticSource (nodes n1, n2 by default).

    Keywords the StaticSource takes (node_metrics, namespaces, pdbs, ...) go to
    it; the rest are the policy's top-level fields (maxNoOfPodsToEvictTotal, ...).
    """
    state = {k: v for k, v in state_and_top.items() if k in _SOURCE_FIELDS}
    top = {k: v for k, v in state_and_top.items() if k not in _SOURCE_FIELDS}
    raw = plugin_policy(name, args, point=point, evictor=evictor, **top)
    source = framework.StaticSource(
        nodes=list(nodes) if nodes is not None else [builders.make_node(n) for n in ("n1", "n2")],
        pods=list(pods),
        **state,
    )
    return harness(
        raw, plugins.registry(), source, backend=backend, clock=clock, sources=sources
    ).runner.run_once()


_SOURCE_FIELDS = frozenset({"node_metrics", "namespaces", "pdbs", "priority_classes"})


def outcome(report: framework.CycleReport) -> tuple[list[str], list[tuple[str, str]]]:
    """(evicted pods in order, (pod, reason code) of every skip); the cycle must not fail."""
    assert not report.failures
    return report.evicted_pods, [(s.pod, s.reason_code.value) for s in report.skipped]
