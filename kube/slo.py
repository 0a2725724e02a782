"""The NodeMetric model (slo.koordinator.sh/v1alpha1), Go durations, CRD metadata.

The agent's NodeMetric reporter builds a `NodeMetric` and sends `to_api()`; the
descheduler's LowNodeLoad reads `NodeMetric.from_api(dict)`. Both must match
what koordlet writes, so the JSON is Go's encoding of Koordinator's types:

- Pointers, slices, maps and strings with `omitempty` are left out when nil or
  empty. Structs are never left out by Go's `omitempty`, so `nodeUsage`,
  `systemUsage` and `podUsage` are always present, as ``{}`` when they hold no
  data.
- Every usage is a ResourceMap: ``{"resources": {"cpu": "1500m", "memory":
  "123456789"}}``. CPU is canonical DecimalSI text; byte amounts are plain
  integers (koordlet's BinarySI would print "1Gi" for an exact multiple; both
  parse to the same value). Koordinator's optional `devices` list is not modelled
  and is dropped on read.
- An aggregate without enough samples (less than half of its window, see
  docs/design.md, "NodeMetric") is written the way koordlet writes a cold-start aggregate: the
  entry stays, with its `duration`, and each of avg/p50/p90/p95/p99 is an empty
  ResourceMap ``{}``. `AggregatedUsage.empty()` builds one; `has_data` tells
  them apart. Readers also accept an entry without `usage` as empty.
- `metav1.Duration` fields are Go duration strings ("5m0s"); `metav1.Time` is
  RFC 3339 with whole seconds.

`from_api(x.to_api()) == x` for every model here; `to_api(from_api(d)) == d` for
any `d` in canonical form (canonical quantities and durations, whole seconds).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any, Final

from kube import classify, configstruct, objects, quantity
from kube import configcodecs as codecs
from kube.quantity import EMPTY, Resources

__all__ = [
    "API_VERSION",
    "DEFAULT_AGGREGATE_DURATIONS",
    "AggregatedUsage",
    "AggregationType",
    "NodeMetric",
    "NodeMetricCollectPolicy",
    "NodeMetricInfo",
    "NodeMetricSpec",
    "NodeMetricStatus",
    "ObjectMeta",
    "PodMetricInfo",
]

GROUP: Final = "slo.koordinator.sh"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
NODEMETRIC_PLURAL: Final = "nodemetrics"
NODESLO_PLURAL: Final = "nodeslos"
DEFAULT_AGGREGATE_DURATIONS: Final = (
    timedelta(minutes=5),
    timedelta(minutes=10),
    timedelta(minutes=30),
)

# ---------------------------------------------------------------- metadata


@dataclass(frozen=True, slots=True)
class ObjectMeta:
    """The metadata the CRD models carry (NodeMetric, NodeSLO, PodMigrationJob)."""

    name: str
    uid: str = ""
    resource_version: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    creation_timestamp: datetime | None = None

    @classmethod
    def from_api(cls, raw: Mapping[str, Any] | None) -> ObjectMeta:
        """Parse `metadata`; fields nodeqos does not model are dropped. ValueError
        names a field of the wrong type (the API server never sends one; a test
        double or a hand-made object may)."""
        raw = raw or {}
        if not isinstance(raw, Mapping):
            raise ValueError("metadata: must be an object")
        texts = [raw.get(key, "") for key in ("name", "uid", "resourceVersion")]
        maps = [raw.get(key) or {} for key in ("labels", "annotations")]
        stamp = raw.get("creationTimestamp")
        if not all(isinstance(text, str) for text in texts):
            raise ValueError("metadata.name, uid, resourceVersion: must be strings")
        if not all(
            isinstance(m, Mapping) and all(isinstance(v, str) for v in m.values()) for m in maps
        ):
            raise ValueError("metadata.labels, annotations: must map strings to strings")
        if stamp is not None and not isinstance(stamp, str):
            raise ValueError("metadata.creationTimestamp: must be an RFC 3339 string")
        return cls(
            texts[0],
            texts[1],
            texts[2],
            MappingProxyType(dict(maps[0])),
            MappingProxyType(dict(maps[1])),
            objects.parse_time(stamp),
        )

    def to_api(self) -> dict[str, Any]:
        """`metadata` with empty fields omitted."""
        out: dict[str, Any] = {"name": self.name}
        if self.uid:
            out["uid"] = self.uid
        if self.resource_version:
            out["resourceVersion"] = self.resource_version
        if self.labels:
            out["labels"] = dict(self.labels)
        if self.annotations:
            out["annotations"] = dict(self.annotations)
        if self.creation_timestamp is not None:
            out["creationTimestamp"] = objects.format_time(self.creation_timestamp)
        return out


# ---------------------------------------------------------------- NodeMetric


class AggregationType(enum.StrEnum):
    """The aggregations an AggregatedUsage carries, keyed as on the wire."""

    AVG = "avg"
    P50 = "p50"
    P90 = "p90"
    P95 = "p95"
    P99 = "p99"


def resource_map_to_api(usage: Resources) -> dict[str, Any]:
    """A ResourceMap: ``{"resources": {...}}``, or ``{}`` when there is no data."""
    return {"resources": usage.to_api()} if usage else {}


def resource_map_from_api(raw: Mapping[str, Any] | None) -> Resources:
    """The resources of a ResourceMap (devices are dropped)."""
    return Resources.from_api((raw or {}).get("resources"))


@dataclass(frozen=True, slots=True)
class AggregatedUsage:
    """Aggregated usage over one window; `usage` maps aggregation → amounts."""

    duration: timedelta
    usage: Mapping[AggregationType, Resources] = field(default_factory=dict)

    @classmethod
    def empty(cls, duration: timedelta) -> AggregatedUsage:
        """A window without enough samples, written as koordlet writes one."""
        return cls(duration, MappingProxyType(dict.fromkeys(AggregationType, EMPTY)))

    @property
    def has_data(self) -> bool:
        """Whether any aggregation holds an amount."""
        return any(self.usage.values())

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> AggregatedUsage:
        """Parse an AggregatedUsage dict; unknown aggregation names are dropped."""
        known = {a.value: a for a in AggregationType}
        usage = {
            known[name]: resource_map_from_api(rm)
            for name, rm in (raw.get("usage") or {}).items()
            if name in known
        }
        return cls(quantity.parse_go_duration(raw.get("duration") or "0s"), MappingProxyType(usage))

    def to_api(self) -> dict[str, Any]:
        """The wire form (usage omitted when the mapping is empty, like a nil Go map)."""
        out: dict[str, Any] = {}
        if self.usage:
            out["usage"] = {a.value: resource_map_to_api(r) for a, r in self.usage.items()}
        out["duration"] = quantity.format_go_duration(self.duration)
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeMetricInfo:
    """`status.nodeMetric`."""

    node_usage: Resources = EMPTY
    system_usage: Resources = EMPTY
    aggregated_node_usages: tuple[AggregatedUsage, ...] = ()
    aggregated_system_usages: tuple[AggregatedUsage, ...] = ()

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> NodeMetricInfo:
        """Parse `status.nodeMetric`."""
        return cls(
            node_usage=resource_map_from_api(raw.get("nodeUsage")),
            system_usage=resource_map_from_api(raw.get("systemUsage")),
            aggregated_node_usages=tuple(
                AggregatedUsage.from_api(a) for a in raw.get("aggregatedNodeUsages") or ()
            ),
            aggregated_system_usages=tuple(
                AggregatedUsage.from_api(a) for a in raw.get("aggregatedSystemUsages") or ()
            ),
        )

    def to_api(self) -> dict[str, Any]:
        """The wire form."""
        out: dict[str, Any] = {"nodeUsage": resource_map_to_api(self.node_usage)}
        if self.aggregated_node_usages:
            out["aggregatedNodeUsages"] = [a.to_api() for a in self.aggregated_node_usages]
        out["systemUsage"] = resource_map_to_api(self.system_usage)
        if self.aggregated_system_usages:
            out["aggregatedSystemUsages"] = [a.to_api() for a in self.aggregated_system_usages]
        return out

    def aggregated(self, duration: timedelta, kind: AggregationType) -> Resources | None:
        """The node's aggregated usage for a window, or None when absent or empty."""
        for agg in self.aggregated_node_usages:
            if agg.duration == duration:
                found = agg.usage.get(kind)
                return found if found else None
        return None


_PRIORITIES: Final = {p.value: p for p in classify.PriorityClass}
_QOS_CLASSES: Final = {q.value: q for q in classify.KoordQOS}


@dataclass(frozen=True, slots=True, kw_only=True)
class PodMetricInfo:
    """One `status.podsMetric[]` entry. Unknown priority/qos strings read as NONE."""

    name: str
    namespace: str
    pod_usage: Resources = EMPTY
    priority: classify.PriorityClass = classify.PriorityClass.NONE
    qos: classify.KoordQOS = classify.KoordQOS.NONE
    extensions: Mapping[str, Any] | None = None

    @property
    def key(self) -> str:
        """ "namespace/name", as `kube.objects.Pod.key`."""
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> PodMetricInfo:
        """Parse a PodMetricInfo dict."""
        return cls(
            name=raw.get("name", ""),
            namespace=raw.get("namespace", ""),
            pod_usage=resource_map_from_api(raw.get("podUsage")),
            priority=_PRIORITIES.get(raw.get("priority", ""), classify.PriorityClass.NONE),
            qos=_QOS_CLASSES.get(raw.get("qos", ""), classify.KoordQOS.NONE),
            extensions=raw.get("extensions"),
        )

    def to_api(self) -> dict[str, Any]:
        """The wire form."""
        out: dict[str, Any] = {}
        if self.name:
            out["name"] = self.name
        if self.namespace:
            out["namespace"] = self.namespace
        out["podUsage"] = resource_map_to_api(self.pod_usage)
        if self.priority:
            out["priority"] = self.priority.value
        if self.qos:
            out["qos"] = self.qos.value
        if self.extensions is not None:
            out["extensions"] = dict(self.extensions)
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class _AggregatePolicy:
    durations: tuple[timedelta, ...] = field(
        default=(),
        metadata=configstruct.spec("durations", codecs.ListOf(codecs.Duration(signed=True))),
    )


class AggregateDurations(configstruct.Codec[tuple[timedelta, ...]]):
    """`{durations: ["5m0s", ...]}` (NodeAggregatePolicy), held as the durations alone."""

    def decode(
        self, raw: object, path: configstruct.FieldPath, errors: configstruct.Errors
    ) -> tuple[timedelta, ...]:
        policy = configstruct.decode_object(
            _AggregatePolicy, raw, path, errors, ignore_unknown=True
        )
        return policy.durations

    def encode(self, value: tuple[timedelta, ...]) -> object:
        return {"durations": [quantity.format_go_duration(d) for d in value]} if value else {}


def _opt(key: str, codec: configstruct.Codec[Any]) -> Any:
    return field(default=None, metadata=configstruct.spec(key, codec))


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeMetricCollectPolicy:
    """`spec.metricCollectPolicy`; None fields are unset on the wire."""

    aggregate_duration_seconds: int | None = _opt("aggregateDurationSeconds", codecs.INTEGER)
    report_interval_seconds: int | None = _opt("reportIntervalSeconds", codecs.INTEGER)
    aggregate_durations: tuple[timedelta, ...] | None = _opt(
        "nodeAggregatePolicy", AggregateDurations()
    )
    node_memory_collect_policy: str | None = _opt("nodeMemoryCollectPolicy", codecs.STRING)

    @classmethod
    def defaults(cls) -> NodeMetricCollectPolicy:
        """koord-manager's defaults: 300s aggregation, 60s reports, 5m/10m/30m windows."""
        return cls(
            aggregate_duration_seconds=300,
            report_interval_seconds=60,
            aggregate_durations=DEFAULT_AGGREGATE_DURATIONS,
            node_memory_collect_policy="usageWithoutPageCache",
        )

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> NodeMetricCollectPolicy:
        """Parse `spec.metricCollectPolicy` (other keys ignored, as Go does); ValueError lists
        every field of the wrong type."""
        errors, where = configstruct.Errors(), configstruct.FieldPath("spec.metricCollectPolicy")
        try:
            found = configstruct.decode_object(cls, raw, where, errors, ignore_unknown=True)
        except configstruct.Invalid as err:
            errors.add(where, err.message)
        if len(errors):
            raise ValueError(str(configstruct.ConfigError(errors)))
        return found

    def to_api(self) -> dict[str, Any]:
        """The wire form."""
        return configstruct.encode_object(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeMetricSpec:
    """`spec`: only the collect policy."""

    collect_policy: NodeMetricCollectPolicy | None = None

    @classmethod
    def from_api(cls, raw: Mapping[str, Any] | None) -> NodeMetricSpec:
        """Parse `spec`."""
        policy = (raw or {}).get("metricCollectPolicy")
        return cls(
            collect_policy=None if policy is None else NodeMetricCollectPolicy.from_api(policy)
        )

    def to_api(self) -> dict[str, Any]:
        """The wire form."""
        if self.collect_policy is None:
            return {}
        return {"metricCollectPolicy": self.collect_policy.to_api()}


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeMetricStatus:
    """`status`; `update_time` is whole seconds on the wire."""

    update_time: datetime | None = None
    node_metric: NodeMetricInfo | None = None
    pods_metric: tuple[PodMetricInfo, ...] = ()
    # `prodReclaimableMetric: {resource: ResourceMap}`: what the Prod pods requested
    # and are predicted not to use (Koordinator's ReclaimableMetric); None: not reported.
    prod_reclaimable: Resources | None = None
    # `prodPeakMetric: {resource: ResourceMap}`: the predicted Prod peak (PeakMetric).
    prod_peak: Resources | None = None

    @classmethod
    def from_api(cls, raw: Mapping[str, Any] | None) -> NodeMetricStatus:
        """Parse `status`."""
        raw = raw or {}
        info = raw.get("nodeMetric")
        return cls(
            update_time=objects.parse_time(raw.get("updateTime")),
            node_metric=None if info is None else NodeMetricInfo.from_api(info),
            pods_metric=tuple(PodMetricInfo.from_api(p) for p in raw.get("podsMetric") or ()),
            prod_reclaimable=_wrapped_resources(raw.get("prodReclaimableMetric")),
            prod_peak=_wrapped_resources(raw.get("prodPeakMetric")),
        )

    def to_api(self) -> dict[str, Any]:
        """The wire form."""
        out: dict[str, Any] = {}
        if self.update_time is not None:
            out["updateTime"] = objects.format_time(self.update_time)
        if self.node_metric is not None:
            out["nodeMetric"] = self.node_metric.to_api()
        if self.pods_metric:
            out["podsMetric"] = [p.to_api() for p in self.pods_metric]
        if self.prod_reclaimable is not None:
            out["prodReclaimableMetric"] = {"resource": resource_map_to_api(self.prod_reclaimable)}
        if self.prod_peak is not None:
            out["prodPeakMetric"] = {"resource": resource_map_to_api(self.prod_peak)}
        return out


def _wrapped_resources(raw: Mapping[str, Any] | None) -> Resources | None:
    """`{resource: ResourceMap}` (ReclaimableMetric, PeakMetric), None when absent."""
    return None if raw is None else resource_map_from_api(raw.get("resource"))


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeMetric:
    """A NodeMetric object, named after its node."""

    metadata: ObjectMeta
    spec: NodeMetricSpec = NodeMetricSpec()
    status: NodeMetricStatus = NodeMetricStatus()

    @property
    def name(self) -> str:
        """The object (and node) name."""
        return self.metadata.name

    @classmethod
    def for_node(cls, node: str) -> NodeMetric:
        """A new NodeMetric for a node, with the default collect policy and no status."""
        return cls(
            metadata=ObjectMeta(node),
            spec=NodeMetricSpec(collect_policy=NodeMetricCollectPolicy.defaults()),
        )

    @classmethod
    def from_api(cls, obj: Mapping[str, Any]) -> NodeMetric:
        """Parse a whole NodeMetric object; raises ValueError when it is malformed.

        Any tool may write a NodeMetric, so anything may arrive: a field of the
        wrong JSON type is a malformed object like a garbage quantity is, and
        callers (the informers, the extender) drop it on this one error.
        """
        try:
            return cls(
                metadata=ObjectMeta.from_api(obj.get("metadata")),
                spec=NodeMetricSpec.from_api(obj.get("spec")),
                status=NodeMetricStatus.from_api(obj.get("status")),
            )
        except (TypeError, AttributeError, KeyError) as err:
            meta = obj.get("metadata") if isinstance(obj, Mapping) else None
            name = meta.get("name") if isinstance(meta, Mapping) else None
            raise ValueError(f"malformed NodeMetric {name!r}: {err!r}") from err

    def to_api(self) -> dict[str, Any]:
        """The whole object, ready to create or update."""
        return {
            "apiVersion": API_VERSION,
            "kind": "NodeMetric",
            "metadata": self.metadata.to_api(),
            "spec": self.spec.to_api(),
            "status": self.status.to_api(),
        }
