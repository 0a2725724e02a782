"""`colocation-config`, as far as each node's NodeMetric collect policy goes.

Koordinator's nodemetric controller (`pkg/slo-controller/nodemetric`) fills a
NodeMetric's `spec.metricCollectPolicy` from the node's colocation strategy
while it is enabled, and with the defaults otherwise; `manager.sloconfig.load`
calls `parse`, `manager.render.nodemetric_spec` reads the result. The other
colocation fields (reclaim thresholds, batch resources) are not read here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from kube import configcodecs as codecs
from kube import configstruct, slo
from kube.configstruct import spec
from manager import configdoc

__all__ = ["DEFAULT_COLLECT", "KEY", "CollectStrategy", "Colocation", "parse"]

KEY = "colocation-config"


def _opt(key: str, codec: configstruct.Codec[Any]) -> Any:
    return field(default=None, metadata=spec(key, codec))


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectStrategy:
    """The NodeMetric collect-policy fields of a `colocation-config` strategy."""

    enable: bool | None = _opt("enable", codecs.BOOL)
    aggregate_duration_seconds: int | None = _opt("metricAggregateDurationSeconds", codecs.POSITIVE)
    report_interval_seconds: int | None = _opt("metricReportIntervalSeconds", codecs.POSITIVE)
    aggregate_durations: tuple[timedelta, ...] | None = _opt(
        "metricAggregatePolicy", slo.AggregateDurations()
    )
    memory_collect_policy: str | None = _opt("metricMemoryCollectPolicy", codecs.NAME)

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
    nodes: tuple[configdoc.NodeStrategy[CollectStrategy], ...] = ()

    def for_labels(self, labels: Mapping[str, str]) -> CollectStrategy:
        """First matching `nodeConfigs` entry, else the cluster strategy."""
        for node in self.nodes:
            if node.selector.matches(labels):
                return node.strategy
        return self.cluster


def _collect(raw: Mapping[str, Any], path: str, sink: configdoc.Sink) -> CollectStrategy:
    """The collect-policy fields of a ColocationStrategy; other fields are not ours here."""
    errors, where = configstruct.Errors(), configstruct.FieldPath(path)
    found = configstruct.decode_object(CollectStrategy, raw, where, errors, ignore_unknown=True)
    sink.add([str(error) for error in errors])
    return found


def parse(text: Any) -> tuple[Colocation | None, configdoc.Sink]:
    sink = configdoc.Sink(KEY)
    if text == "":  # Koordinator: an empty colocation-config means the defaults
        return Colocation(), sink
    doc = configdoc.document(text, sink)
    if doc is None:
        return None, sink
    cluster = DEFAULT_COLLECT.merged(_collect(doc, KEY, sink))
    nodes = []
    for i, raw in enumerate(configdoc.list_field(doc, "nodeConfigs", KEY, sink)):
        path = f"{KEY}.nodeConfigs[{i}]"
        profile = configdoc.profile(raw, path, sink)
        if profile is not None:
            merged = cluster.merged(_collect(raw, path, sink))
            nodes.append(configdoc.NodeStrategy(profile[0], profile[1], merged))
    if sink.errors:
        return None, sink
    return Colocation(cluster, tuple(nodes)), sink
