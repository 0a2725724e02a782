"""Which PodMetrics a metrics-server consumer reads, and when it reads them again.

LowNodeUtilization (`metricsUtilization: {source: KubernetesMetrics}`) needs
every node's NodeMetrics each cycle, but a pod's usage only when it considers
evicting the pod, which happens only on overutilized nodes. `PodUsage` reads
NodeMetrics once a cycle (`read_nodes`) and a pod's usage only when asked
(`usage`), for the pods the plugin said it may ask about (`want`):

- a namespace where the wanted pods are many (`LIST_FACTOR` x wanted >= the
  namespace's pods) is listed once when its first pod is asked for, and only
  the wanted pods in the answer are decoded and kept;
- otherwise each pod asked for is one GET, as upstream reads PodMetrics
  (`actualUsageClient.podUsage` at v0.36.0). A GET costs about what
  decoding fifty list items does (the client's side; the server's is alike).

Between cycles a kept usage is read again only when metrics-server can have a
newer one. metrics-server takes a node's and its pods' samples in one scrape
of the kubelet and stores a whole scrape round at once (`pkg/storage` at
v0.8.0), so a pod's usage is kept while its node's NodeMetrics (`timestamp`,
`window`) are unchanged, the pod is the same (uid) on the same node, and it
was read less than `MAX_AGE` ago: metrics-server's default resolution, the
bound for a kubelet whose node sample stalls while its pods' advance.

May import (of ours): `kube`.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from descheduler.usagesources.metricsserver import NodeReading
from kube import objects
from kube.quantity import Resources

__all__ = ["LIST_FACTOR", "MAX_AGE", "MetricsReader", "PodUsage"]

MAX_AGE = timedelta(seconds=15)  # metrics-server's default --metric-resolution
LIST_FACTOR = 50


class MetricsReader(Protocol):
    """`metricsserver.MetricsServer`, or a test's fake."""

    def nodes(self) -> Mapping[str, NodeReading]: ...

    def pod(self, namespace: str, name: str) -> Resources | None: ...

    def pods_in(self, namespace: str, names: Collection[str]) -> Mapping[str, Resources]: ...


@dataclass(frozen=True, slots=True)
class _Kept:
    uid: str
    node: str
    stamp: str | None
    read_at: datetime
    usage: Resources | None


class PodUsage:
    """Node usage each cycle and pod usage on demand from one metrics reader, with the
    pod usages still good kept between cycles. One per plugin instance."""

    def __init__(
        self,
        reader: MetricsReader,
        *,
        clock: Callable[[], datetime],
        max_age: timedelta = MAX_AGE,
    ) -> None:
        self._reader = reader
        self._clock = clock
        self._max_age = max_age
        self._nodes: Mapping[str, NodeReading] = {}
        self._kept: dict[str, _Kept] = {}
        self._wanted: dict[str, dict[str, objects.Pod]] = {}
        self._population: Callable[[], Mapping[str, int]] = dict
        self._counted: Mapping[str, int] | None = None

    def read_nodes(self) -> Mapping[str, NodeReading]:
        """Every node's NodeMetrics, read now; begins a cycle."""
        self._nodes = self._reader.nodes()
        now = self._clock()
        self._kept = {key: kept for key, kept in self._kept.items() if self._still_good(kept, now)}
        self._wanted = {}
        self._counted = None
        return self._nodes

    def want(
        self, pods: Iterable[objects.Pod], population: Callable[[], Mapping[str, int]]
    ) -> None:
        """The pods this cycle may ask `usage` about; `population` counts each
        namespace's pods (called only if a read must choose between GETs and a list).

        Kept usages of other pods are dropped.
        """
        kept: dict[str, _Kept] = {}
        wanted: dict[str, dict[str, objects.Pod]] = collections.defaultdict(dict)
        for pod in pods:
            entry = self._kept.get(pod.key)
            if entry is not None and entry.uid == pod.uid and entry.node == pod.node_name:
                kept[pod.key] = entry
            else:
                wanted[pod.namespace][pod.name] = pod
        self._kept = kept
        self._wanted = dict(wanted)
        self._population = population
        self._counted = None

    def usage(self, pod: objects.Pod) -> Resources | None:
        """The pod's cpu and memory; None when metrics-server reports none for it.

        Raises `rest.ApiError` / `rest.ApiUnavailable` when a needed read fails.
        """
        entry = self._kept.get(pod.key)
        if entry is None or entry.uid != pod.uid or entry.node != pod.node_name:
            self._read(pod)
            entry = self._kept[pod.key]
        return entry.usage

    def _still_good(self, kept: _Kept, now: datetime) -> bool:
        """Whether metrics-server cannot have renewed a usage read in an earlier cycle."""
        node = self._nodes.get(kept.node)
        return node is not None and kept.stamp == node.stamp and now - kept.read_at < self._max_age

    def _read(self, pod: objects.Pod) -> None:
        pending = self._wanted.get(pod.namespace, {})
        pending.pop(pod.name, None)
        batch = [pod, *pending.values()]
        if self._counted is None and pending:
            self._counted = self._population()
        population = (self._counted or {}).get(pod.namespace)
        now = self._clock()
        if pending and population is not None and len(batch) * LIST_FACTOR >= population:
            found = self._reader.pods_in(pod.namespace, {p.name for p in batch})
            for each in batch:
                self._keep(each, found.get(each.key), now)
            del self._wanted[pod.namespace]
        else:
            self._keep(pod, self._reader.pod(pod.namespace, pod.name), now)

    def _keep(self, pod: objects.Pod, usage: Resources | None, now: datetime) -> None:
        node = self._nodes.get(pod.node_name)
        stamp = None if node is None else node.stamp
        self._kept[pod.key] = _Kept(pod.uid, pod.node_name, stamp, now, usage)
