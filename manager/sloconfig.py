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
  objects merge, lists replace; `kube.jsonstruct.merge`).
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

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic, TypeVar

from kube import jsonstruct, nodeslo, quantity, selectors, slo

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
COLOCATION = "colocation-config"
NODESLO_KEYS = (THRESHOLD, RESOURCE_QOS, CPU_BURST, SYSTEM, HOST_APPLICATION)
KEYS = (*NODESLO_KEYS, COLOCATION)

S = TypeVar("S")


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with the ConfigMap: the key and a "field.path: what" message."""

    key: str
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True, slots=True)
class NodeStrategy(Generic[S]):
    """A node strategy, already merged over the cluster strategy."""

    name: str
    selector: selectors.LabelSelector
    strategy: S


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


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectStrategy:
    """The NodeMetric collect-policy fields of a `colocation-config` strategy."""

    enable: bool | None = None
    aggregate_duration_seconds: int | None = None
    report_interval_seconds: int | None = None
    aggregate_durations: tuple[timedelta, ...] | None = None
    memory_collect_policy: str | None = None

    def merged(self, over: CollectStrategy) -> CollectStrategy:
        """`over`'s set fields win (MergeCfg: lists replace)."""
        changes = {
            f.name: getattr(over, f.name)
            for f in dataclasses.fields(over)
            if getattr(over, f.name) is not None
        }
        return dataclasses.replace(self, **changes)

    def collect_policy(self) -> slo.NodeMetricCollectPolicy:
        """Koordinator's nodemetric controller: the strategy when enabled, else the defaults."""
        if not self.enable:
            return slo.NodeMetricCollectPolicy.defaults()
        return slo.NodeMetricCollectPolicy(
            aggregate_duration_seconds=self.aggregate_duration_seconds,
            report_interval_seconds=self.report_interval_seconds,
            aggregate_durations=self.aggregate_durations,
            node_memory_collect_policy=self.memory_collect_policy,
        )


DEFAULT_COLLECT = CollectStrategy(  # sloconfig.DefaultColocationStrategy
    enable=False,
    aggregate_duration_seconds=300,
    report_interval_seconds=60,
    aggregate_durations=slo.DEFAULT_AGGREGATE_DURATIONS,
    memory_collect_policy="usageWithoutPageCache",
)


@dataclass(frozen=True, slots=True)
class Colocation:
    """`colocation-config`, as far as the NodeMetric collect policy goes."""

    cluster: CollectStrategy = DEFAULT_COLLECT
    nodes: tuple[NodeStrategy[CollectStrategy], ...] = ()

    def for_labels(self, labels: Mapping[str, str]) -> CollectStrategy:
        """First matching `nodeConfigs` entry, else the cluster strategy."""
        for node in self.nodes:
            if node.selector.matches(labels):
                return node.strategy
        return self.cluster


def _decoded(cls: type[S], raw: Mapping[str, Any]) -> S:
    errors: list[str] = []
    found = jsonstruct.decode(cls, raw, "defaults", errors)
    if errors:  # the tables below are ours: a typo must fail loudly at import
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


class _Sink:
    """Collects errors and warnings of one key."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.errors: list[Problem] = []
        self.warnings: list[Problem] = []

    def add(self, messages: Sequence[str]) -> None:
        for message in messages:
            target = self.warnings if message.endswith(": unknown field") else self.errors
            target.append(Problem(self.key, message))

    def error(self, message: str) -> None:
        self.errors.append(Problem(self.key, message))


def _document(text: Any, sink: _Sink) -> dict[str, Any] | None:
    if not isinstance(text, str):
        sink.error(f"{sink.key}: must be a string holding a JSON object")
        return None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        sink.error(f"{sink.key}: invalid JSON at line {err.lineno} column {err.colno}: {err.msg}")
        return None
    if not isinstance(doc, dict):
        sink.error(f"{sink.key}: must be a JSON object")
        return None
    return doc


def _profile(raw: Any, path: str, sink: _Sink) -> tuple[str, selectors.LabelSelector] | None:
    """`name` and `nodeSelector` of a node strategy (NodeCfgProfile)."""
    if not isinstance(raw, Mapping):
        sink.error(f"{path}: must be an object")
        return None
    name = raw.get("name") or ""
    if not isinstance(name, str):
        sink.error(f"{path}.name: must be a string")
        return None
    sel = raw.get("nodeSelector")
    if sel is not None and not isinstance(sel, Mapping):
        sink.error(f"{path}.nodeSelector: must be a label selector object")
        return None
    try:
        return name, selectors.LabelSelector.from_api(sel, f"{path}.nodeSelector")
    except (ValueError, TypeError, AttributeError) as err:
        sink.error(str(err) if isinstance(err, ValueError) else f"{path}.nodeSelector: {err}")
        return None


def _list(doc: Mapping[str, Any], name: str, path: str, sink: _Sink) -> list[Any]:
    found = doc.get(name)
    if found is None:
        return []
    if not isinstance(found, list):
        sink.error(f"{path}.{name}: must be a list")
        return []
    return found


def _strategies(
    key: str, text: Any, cls: type[S], default: S
) -> tuple[Strategies[S] | None, _Sink]:
    sink = _Sink(key)
    doc = _document(text, sink)
    if doc is None:
        return None, sink
    sink.add([f"{key}.{k}: unknown field" for k in doc if k not in _STRATEGY_DOC_KEYS])
    messages: list[str] = []
    cluster = default
    raw_cluster = doc.get("clusterStrategy")
    if raw_cluster is not None:
        decoded = jsonstruct.decode(cls, raw_cluster, f"{key}.clusterStrategy", messages)
        cluster = jsonstruct.merge(default, decoded)
    nodes = []
    for i, raw in enumerate(_list(doc, "nodeStrategies", key, sink)):
        path = f"{key}.nodeStrategies[{i}]"
        profile = _profile(raw, path, sink)
        if profile is None:
            continue
        inline = {k: v for k, v in raw.items() if k not in _PROFILE_KEYS}
        own = jsonstruct.decode(cls, inline, path, messages)
        nodes.append(NodeStrategy(profile[0], profile[1], jsonstruct.merge(cluster, own)))
    sink.add(messages)
    if sink.errors:
        return None, sink
    return Strategies(cluster, tuple(nodes)), sink


_STRATEGY_DOC_KEYS = frozenset({"clusterStrategy", "nodeStrategies"})
_PROFILE_KEYS = frozenset({"name", "nodeSelector"})


def _host_applications(text: Any) -> tuple[HostApplications | None, _Sink]:
    sink = _Sink(HOST_APPLICATION)
    doc = _document(text, sink)
    if doc is None:
        return None, sink
    sink.add(
        [
            f"{HOST_APPLICATION}.{k}: unknown field"
            for k in doc
            if k not in ("applications", "nodeConfigs")
        ]
    )
    apps = tuple(_list(doc, "applications", HOST_APPLICATION, sink))
    nodes = []
    for i, raw in enumerate(_list(doc, "nodeConfigs", HOST_APPLICATION, sink)):
        path = f"{HOST_APPLICATION}.nodeConfigs[{i}]"
        profile = _profile(raw, path, sink)
        if profile is not None:
            own = tuple(_list(raw, "applications", path, sink))
            nodes.append(NodeStrategy(profile[0], profile[1], own))
    if sink.errors:
        return None, sink
    return HostApplications(apps, tuple(nodes)), sink


def _collect(raw: Mapping[str, Any], path: str, sink: _Sink) -> CollectStrategy:
    """The collect-policy fields of a ColocationStrategy; other fields are not ours here."""
    values: dict[str, Any] = {}
    enable = raw.get("enable")
    if enable is not None:
        if isinstance(enable, bool):
            values["enable"] = enable
        else:
            sink.error(f"{path}.enable: must be a boolean")
    for wire, name in (
        ("metricAggregateDurationSeconds", "aggregate_duration_seconds"),
        ("metricReportIntervalSeconds", "report_interval_seconds"),
    ):
        value = raw.get(wire)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            sink.error(f"{path}.{wire}: must be an integer >= 1")
        else:
            values[name] = value
    policy = raw.get("metricAggregatePolicy")
    if policy is not None:
        durations = policy.get("durations") if isinstance(policy, Mapping) else None
        where = f"{path}.metricAggregatePolicy.durations"
        if not isinstance(policy, Mapping) or not isinstance(durations or [], list):
            sink.error(f'{where}: must be a list of durations such as "5m"')
        else:
            parsed = []
            for j, text in enumerate(durations or []):
                try:
                    parsed.append(quantity.parse_go_duration(text))
                except (ValueError, TypeError):
                    sink.error(f'{where}[{j}]: invalid duration {text!r} (e.g. "5m", "1h30m")')
            values["aggregate_durations"] = tuple(parsed)
    memory = raw.get("metricMemoryCollectPolicy")
    if memory is not None:
        if not isinstance(memory, str) or not memory:
            sink.error(f"{path}.metricMemoryCollectPolicy: must be a non-empty string")
        else:
            values["memory_collect_policy"] = memory
    return CollectStrategy(**values)


def _colocation(text: Any) -> tuple[Colocation | None, _Sink]:
    sink = _Sink(COLOCATION)
    if text == "":  # Koordinator: an empty colocation-config means the defaults
        return Colocation(), sink
    doc = _document(text, sink)
    if doc is None:
        return None, sink
    cluster = DEFAULT_COLLECT.merged(_collect(doc, COLOCATION, sink))
    nodes = []
    for i, raw in enumerate(_list(doc, "nodeConfigs", COLOCATION, sink)):
        path = f"{COLOCATION}.nodeConfigs[{i}]"
        profile = _profile(raw, path, sink)
        if profile is not None:
            merged = cluster.merged(_collect(raw, path, sink))
            nodes.append(NodeStrategy(profile[0], profile[1], merged))
    if sink.errors:
        return None, sink
    return Colocation(cluster, tuple(nodes)), sink


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
    sinks: list[_Sink] = []
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
        ("colocation", COLOCATION, _colocation),
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
