"""Where snapshots come from: the `ClusterSource` Protocol and its two implementations.

- `InformerSource` keeps list-watch caches (`kube.cache.Informer`) of Nodes,
  Pods, PodDisruptionBudgets, NodeMetrics, Namespaces and PriorityClasses, each
  projected at once into its slim view; `state()` copies them out per cycle.
- `StaticSource` serves fixed lists: unit tests build it from `tests/builders`,
  and `simulate` builds it from a `kind: List` file (`from_objects`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, Protocol

from descheduler.framework.pdb import DisruptionBudget
from descheduler.framework.snapshot import ClusterState
from kube import cache, objects, rest, slo

log = logging.getLogger(__name__)

_MAPPINGS = frozenset({"namespaces", "priority_classes"})
NAMESPACES = cache.Resource("", "v1", "namespaces", False)
PRIORITY_CLASSES = cache.Resource("scheduling.k8s.io", "v1", "priorityclasses", False)


class SourceNotReady(Exception):
    """The source cannot give a complete state yet (caches not synced)."""


class ClusterSource(Protocol):
    """Gives the runner the cluster's current state, once per cycle."""

    def state(self) -> ClusterState:
        """A complete state; raises `SourceNotReady` when there is none yet."""
        ...


class StaticSource:
    """A fixed cluster: the same state every cycle (swap it with `replace`)."""

    def __init__(
        self,
        *,
        nodes: Iterable[objects.Node] = (),
        pods: Iterable[objects.Pod] = (),
        pdbs: Iterable[DisruptionBudget] = (),
        node_metrics: Iterable[slo.NodeMetric] = (),
        namespaces: Mapping[str, Mapping[str, str]] | None = None,
        priority_classes: Mapping[str, int] | None = None,
    ) -> None:
        self._state = ClusterState(
            nodes=tuple(nodes),
            pods=tuple(pods),
            pdbs=tuple(pdbs),
            node_metrics=tuple(node_metrics),
            namespaces=MappingProxyType(dict(namespaces or {})),
            priority_classes=MappingProxyType(dict(priority_classes or {})),
        )

    @classmethod
    def from_objects(cls, items: Iterable[Mapping[str, Any]]) -> StaticSource:
        """Build from raw API objects (a `kind: List`'s items); unknown kinds are ignored."""
        nodes, pods, pdbs, metrics = [], [], [], []
        namespaces: dict[str, Mapping[str, str]] = {}
        priority_classes: dict[str, int] = {}
        for item in items:
            kind = item.get("kind")
            meta = item.get("metadata") or {}
            if kind == "Node":
                nodes.append(objects.Node.from_api(item))
            elif kind == "Pod":
                pods.append(objects.Pod.from_api(item))
            elif kind == "PodDisruptionBudget":
                pdbs.append(DisruptionBudget.from_api(item))
            elif kind == "NodeMetric":
                metrics.append(slo.NodeMetric.from_api(item))
            elif kind == "Namespace":
                namespaces[meta.get("name", "")] = dict(meta.get("labels") or {})
            elif kind == "PriorityClass":
                priority_classes[meta.get("name", "")] = int(item.get("value", 0))
            else:
                log.debug("ignoring object of kind %r", kind)
        return cls(
            nodes=nodes,
            pods=pods,
            pdbs=pdbs,
            node_metrics=metrics,
            namespaces=namespaces,
            priority_classes=priority_classes,
        )

    def replace(self, **changes: Any) -> None:
        """Change parts of the state between cycles (tests: a pod finished terminating)."""
        converted: dict[str, Any] = {
            key: MappingProxyType(dict(value)) if key in _MAPPINGS else tuple(value)
            for key, value in changes.items()
        }
        self._state = dataclasses.replace(self._state, **converted)

    def state(self) -> ClusterState:
        return self._state


def _namespace_labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return MappingProxyType(dict((obj.get("metadata") or {}).get("labels") or {}))


def _priority_value(obj: Mapping[str, Any]) -> int:
    return int(obj.get("value", 0))


class InformerSource:
    """Live list-watch caches of everything a snapshot needs.

    `node_metrics=False` leaves NodeMetrics out (a cluster without Koordinator's
    CRDs; a missing resource would keep that informer from ever syncing).
    """

    def __init__(self, client: rest.Rest, *, node_metrics: bool = True) -> None:
        self._nodes = cache.Informer(client, cache.NODES, project=objects.Node.from_api)
        self._pods = cache.Informer(client, cache.PODS, project=objects.Pod.from_api)
        self._pdbs = cache.Informer(client, cache.PDBS, project=DisruptionBudget.from_api)
        self._namespaces = cache.Informer(client, NAMESPACES, project=_namespace_labels)
        self._priority_classes = cache.Informer(client, PRIORITY_CLASSES, project=_priority_value)
        self._metrics: cache.Informer[slo.NodeMetric] | None = (
            cache.Informer(client, cache.NODEMETRICS, project=slo.NodeMetric.from_api)
            if node_metrics
            else None
        )

    def _informers(self) -> list[cache.Informer[Any]]:
        found: list[cache.Informer[Any]] = [
            self._nodes,
            self._pods,
            self._pdbs,
            self._namespaces,
            self._priority_classes,
        ]
        if self._metrics is not None:
            found.append(self._metrics)
        return found

    def start(self) -> InformerSource:
        for informer in self._informers():
            informer.start()
        return self

    def stop(self) -> None:
        for informer in self._informers():
            informer.stop()

    @property
    def synced(self) -> bool:
        return all(i.synced for i in self._informers())

    def wait_synced(self, timeout: float | None = None) -> bool:
        """Block until every cache has listed once (or `timeout` seconds pass)."""
        return all(i.wait_synced(timeout) for i in self._informers())

    def state(self) -> ClusterState:
        if not self.synced:
            waiting = [i.name for i in self._informers() if not i.synced]
            raise SourceNotReady(f"caches not synced yet: {', '.join(waiting)}")
        # Cache keys of cluster-scoped objects are their names.
        namespaces = _by_key(self._namespaces)
        classes = _by_key(self._priority_classes)
        return ClusterState(
            nodes=tuple(self._nodes.items()),
            pods=tuple(self._pods.items()),
            pdbs=tuple(self._pdbs.items()),
            node_metrics=tuple(self._metrics.items()) if self._metrics is not None else (),
            namespaces=MappingProxyType(namespaces),
            priority_classes=MappingProxyType(classes),
        )


def _by_key(informer: cache.Informer[Any]) -> dict[str, Any]:
    found = {}
    for key in informer.keys():  # noqa: SIM118 (an Informer is not iterable)
        value = informer.get(key)
        if value is not None:  # deleted between keys() and get()
            found[key] = value
    return found
