"""Koordinator's `slo-controller-config` ConfigMap, read unchanged, into typed strategies.

The reconciler (`manager.reconcile`) calls `load(data, previous)` on every
change of the ConfigMap and renders NodeSLOs from the result with
`manager.render`. Facts from Koordinator (koordinator-sh/koordinator at
a7a1b76b, `pkg/slo-controller/nodeslo/resource_strategy.go`,
`nodeslo_cm_event_handler.go`, `pkg/util/sloconfig/nodeslo_config.go`,
`colocation_config.go`, `pkg/slo-controller/config/colocation_cm_event_handler.go`;
written down in docs/manager.md):

- Each NodeSLO key is a JSON document ``{"clusterStrategy": {...},
  "nodeStrategies": [{"name", "nodeSelector", <strategy fields inline>}]}``.
- The cluster strategy is Koordinator's built-in default for the key with the
  document's `clusterStrategy` merged over it; each node strategy is merged over
  that merged cluster strategy (JSON-unmarshal-over semantics: set fields win,
  objects merge, lists replace; `kube.configstruct.merge`).
- A node takes the FIRST node strategy whose selector matches its labels, else
  the cluster strategy. A missing `nodeSelector` matches no node; ``{}`` matches
  every node.
- A missing key means the defaults for that key; a missing ConfigMap means the
  defaults for every key.
- Keys are independent: a broken key keeps its last good value, the others
  still apply.

Where nodeqos is stricter than Koordinator (a wrong type or out-of-range value
rejects the key instead of being half-applied; an invalid node selector rejects
the key instead of being skipped) docs/deviations.md says so. Unknown fields are
ignored as Go ignores them, and reported as warnings (a typo should be seen).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from kube import configstruct, nodeslo
from manager import collectpolicy, configdoc

__all__ = [
    "CONFIGMAP_NAME",
    "CONFIGMAP_NAMESPACE",
    "KEYS",
    "NODESLO_KEYS",
    "CollectStrategy",
    "Colocation",
    "HostApplications",
    "Loaded",
    "NodeStrategy",
    "Problem",
    "SLOConfig",
    "Strategies",
    "default_config",
    "load",
]

CONFIGMAP_NAMESPACE = "koordinator-system"  # sloconfig.ConfigNameSpace
CONFIGMAP_NAME = "slo-controller-config"  # sloconfig.SLOCtrlConfigMap

THRESHOLD = "resource-threshold-config"
RESOURCE_QOS = "resource-qos-config"
CPU_BURST = "cpu-burst-config"
SYSTEM = "system-config"
HOST_APPLICATION = "host-application-config"
COLOCATION = collectpolicy.KEY
NODESLO_KEYS = (THRESHOLD, RESOURCE_QOS, CPU_BURST, SYSTEM, HOST_APPLICATION)
KEYS = (*NODESLO_KEYS, COLOCATION)

S = TypeVar("S")

# Re-exported: callers read the whole config's types from here.
Problem = configdoc.Problem
NodeStrategy = configdoc.NodeStrategy
CollectStrategy = collectpolicy.CollectStrategy
Colocation = collectpolicy.Colocation
DEFAULT_COLLECT = collectpolicy.DEFAULT_COLLECT


@dataclass(frozen=True, slots=True)
class Strategies(Generic[S]):
    """The merged cluster strategy and node strategies of one key."""

    cluster: S
    nodes: tuple[NodeStrategy[S], ...] = ()

    def for_labels(self, labels: Mapping[str, str]) -> S:
        """The first matching node strategy, else the cluster strategy."""
        for node in self.nodes:
            if node.selector.matches(labels):
                return node.strategy
        return self.cluster


@dataclass(frozen=True, slots=True)
class HostApplications:
    """`host-application-config`: `applications` and `nodeConfigs[{nodeSelector, applications}]`."""

    applications: tuple[Any, ...] = ()
    nodes: tuple[NodeStrategy[tuple[Any, ...]], ...] = ()

    def for_labels(self, labels: Mapping[str, str]) -> tuple[Any, ...]:
        """The first matching node config's applications, else the cluster's."""
        for node in self.nodes:
            if node.selector.matches(labels):
                return node.strategy
        return self.applications


def _decoded(cls: type[S], raw: Mapping[str, Any]) -> S:
    errors = configstruct.Errors()
    found = configstruct.decode_partial(cls, raw, configstruct.FieldPath("defaults"), errors)
    if len(errors):  # the tables below are ours: a typo must fail loudly at import
        raise AssertionError(f"bad defaults for {cls.__name__}: {errors}")
    return found


# Koordinator's controller-side defaults (DefaultSLOCfg): NOT the agent's full
# defaults (kube.nodeslo): the agent merges what we render over those.
DEFAULT_THRESHOLD = _decoded(
    nodeslo.ResourceThresholdStrategy,
    {
        "enable": False,
        "cpuSuppressThresholdPercent": 65,
        "cpuSuppressPolicy": "cpuset",
        "memoryEvictThresholdPercent": 70,
        "cpuEvictPolicy": "evictByRealLimit",
    },
)
DEFAULT_RESOURCE_QOS = nodeslo.ResourceQOSStrategy()  # an empty strategy, not the class defaults
DEFAULT_CPU_BURST = _decoded(
    nodeslo.CPUBurstStrategy,
    {
        "policy": "none",
        "cpuBurstPercent": 1000,
        "cfsQuotaBurstPercent": 300,
        "cfsQuotaBurstPeriodSeconds": -1,
        "sharePoolThresholdPercent": 50,
    },
)
DEFAULT_SYSTEM = _decoded(nodeslo.SystemStrategy, {"totalNetworkBandwidth": "0"})


@dataclass(frozen=True, slots=True, kw_only=True)
class SLOConfig:
    """Every key's merged strategies; None: no good value yet (broken since start)."""

    threshold: Strategies[nodeslo.ResourceThresholdStrategy] | None
    resource_qos: Strategies[nodeslo.ResourceQOSStrategy] | None
    cpu_burst: Strategies[nodeslo.CPUBurstStrategy] | None
    system: Strategies[nodeslo.SystemStrategy] | None
    host_applications: HostApplications | None
    colocation: Colocation | None

    @property
    def nodeslo_ready(self) -> bool:
        """Whether every NodeSLO key has a good value (else NodeSLOs are not written)."""
        return None not in (
            self.threshold,
            self.resource_qos,
            self.cpu_burst,
            self.system,
            self.host_applications,
        )


def default_config() -> SLOConfig:
    """What a missing ConfigMap means."""
    return SLOConfig(
        threshold=Strategies(DEFAULT_THRESHOLD),
        resource_qos=Strategies(DEFAULT_RESOURCE_QOS),
        cpu_burst=Strategies(DEFAULT_CPU_BURST),
        system=Strategies(DEFAULT_SYSTEM),
        host_applications=HostApplications(),
        colocation=Colocation(),
    )


@dataclass(frozen=True, slots=True)
class Loaded:
    """What `load` found: the config to use, the problems (key kept), the warnings."""

    config: SLOConfig
    problems: tuple[Problem, ...] = ()
    warnings: tuple[Problem, ...] = ()


# --------------------------------------------------------------------- decoding


def _strategies(
    key: str, text: Any, cls: type[S], default: S
) -> tuple[Strategies[S] | None, configdoc.Sink]:
    sink = configdoc.Sink(key)
    doc = configdoc.document(text, sink)
    if doc is None:
        return None, sink
    sink.add([f"{key}.{k}: unknown field" for k in doc if k not in _STRATEGY_DOC_KEYS])
    messages = configstruct.Errors()
    cluster = default
    raw_cluster = doc.get("clusterStrategy")
    if raw_cluster is not None:
        where = configstruct.FieldPath(f"{key}.clusterStrategy")
        cluster = configstruct.merge(
            default, configstruct.decode_partial(cls, raw_cluster, where, messages)
        )
    nodes = []
    for i, raw in enumerate(configdoc.list_field(doc, "nodeStrategies", key, sink)):
        path = f"{key}.nodeStrategies[{i}]"
        profile = configdoc.profile(raw, path, sink)
        if profile is None:
            continue
        inline = {k: v for k, v in raw.items() if k not in _PROFILE_KEYS}
        own = configstruct.decode_partial(cls, inline, configstruct.FieldPath(path), messages)
        nodes.append(NodeStrategy(profile[0], profile[1], configstruct.merge(cluster, own)))
    sink.add([str(message) for message in messages])
    if sink.errors:
        return None, sink
    return Strategies(cluster, tuple(nodes)), sink


_STRATEGY_DOC_KEYS = frozenset({"clusterStrategy", "nodeStrategies"})
_PROFILE_KEYS = frozenset({"name", "nodeSelector"})


def _host_applications(text: Any) -> tuple[HostApplications | None, configdoc.Sink]:
    sink = configdoc.Sink(HOST_APPLICATION)
    doc = configdoc.document(text, sink)
    if doc is None:
        return None, sink
    sink.add(
        [
            f"{HOST_APPLICATION}.{k}: unknown field"
            for k in doc
            if k not in ("applications", "nodeConfigs")
        ]
    )
    apps = tuple(configdoc.list_field(doc, "applications", HOST_APPLICATION, sink))
    nodes = []
    for i, raw in enumerate(configdoc.list_field(doc, "nodeConfigs", HOST_APPLICATION, sink)):
        path = f"{HOST_APPLICATION}.nodeConfigs[{i}]"
        profile = configdoc.profile(raw, path, sink)
        if profile is not None:
            own = tuple(configdoc.list_field(raw, "applications", path, sink))
            nodes.append(NodeStrategy(profile[0], profile[1], own))
    if sink.errors:
        return None, sink
    return HostApplications(apps, tuple(nodes)), sink


def load(data: Mapping[str, Any] | None, previous: SLOConfig | None = None) -> Loaded:
    """The config for a ConfigMap's `data` (None: no ConfigMap); pure, never raises.

    A key with problems keeps its value in `previous` (None when there is none:
    the caller then writes nothing that key governs).
    """
    if data is None:
        return Loaded(default_config())
    base = default_config()
    prev = previous or SLOConfig(
        threshold=None,
        resource_qos=None,
        cpu_burst=None,
        system=None,
        host_applications=None,
        colocation=None,
    )
    sinks: list[configdoc.Sink] = []
    values: dict[str, Any] = {}
    plans: tuple[tuple[str, str, Any, Any], ...] = (
        ("threshold", THRESHOLD, nodeslo.ResourceThresholdStrategy, DEFAULT_THRESHOLD),
        ("resource_qos", RESOURCE_QOS, nodeslo.ResourceQOSStrategy, DEFAULT_RESOURCE_QOS),
        ("cpu_burst", CPU_BURST, nodeslo.CPUBurstStrategy, DEFAULT_CPU_BURST),
        ("system", SYSTEM, nodeslo.SystemStrategy, DEFAULT_SYSTEM),
    )
    for attr, key, cls, default in plans:
        if key not in data:
            values[attr] = getattr(base, attr)
            continue
        found, sink = _strategies(key, data[key], cls, default)
        sinks.append(sink)
        values[attr] = found if found is not None else getattr(prev, attr)
    for attr, key, parse in (
        ("host_applications", HOST_APPLICATION, _host_applications),
        ("colocation", COLOCATION, collectpolicy.parse),
    ):
        if key not in data:
            values[attr] = getattr(base, attr)
            continue
        found_other, sink = parse(data[key])
        sinks.append(sink)
        values[attr] = found_other if found_other is not None else getattr(prev, attr)
    return Loaded(
        SLOConfig(**values),
        tuple(p for s in sinks for p in s.errors),
        tuple(p for s in sinks for p in s.warnings),
    )
