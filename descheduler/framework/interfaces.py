"""The extension points, as Protocols a plugin class implements by having the method.

A profile enables plugins at extension points (`descheduler.config.ExtensionPoint`);
at start-up the framework checks each enabled plugin against the Protocol of
every point it is enabled at (`POINT_PROTOCOLS`) and refuses to start, naming
plugin and point, when the method is missing.

    class MyBalancer:
        name = "MyBalancer"
        def __init__(self, args: MyArgs, handle: Handle) -> None: ...
        def balance(self, snapshot: Snapshot) -> None:
            for pod in self.handle.evictor.evictable(snapshot.pods_on("n1"), plugin=self.name):
                self.handle.evictor.evict(pod, plugin=self.name, reason="n1 is hot")

Deschedule and Balance plugins decide; the evictor proxy (`Evictor`, on the
Handle) enforces filters, limits and dry-run. Filter, PreEvictionFilter and
Evict plugins are the pieces that proxy is made of (DefaultEvictor is all
three). A plugin may also be a `ControllerPlugin`: the runner then gives its
`run(stop)` a thread of its own for as long as the descheduler runs.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Protocol, runtime_checkable

from descheduler.config import ExtensionPoint
from descheduler.evictions import Backend, EvictOptions
from descheduler.framework.reasons import Refusal
from descheduler.framework.snapshot import Snapshot
from kube import eviction, objects
from kube.quantity import Resources


class Clock(Protocol):
    """Now, as an aware UTC datetime (`lambda: datetime.now(UTC)` in production)."""

    def __call__(self) -> datetime: ...


@runtime_checkable
class Plugin(Protocol):
    """Every plugin has a name (its registry name)."""

    name: str


@runtime_checkable
class DeschedulePlugin(Protocol):
    """Evicts pods that break a rule (affinity, taints, lifetime, ...)."""

    name: str

    def deschedule(self, snapshot: Snapshot) -> None: ...


@runtime_checkable
class BalancePlugin(Protocol):
    """Moves pods to even out the cluster (LowNodeLoad, RemoveDuplicates, ...)."""

    name: str

    def balance(self, snapshot: Snapshot) -> None: ...


@runtime_checkable
class FilterPlugin(Protocol):
    """May a pod be evicted at all? None lets it through."""

    name: str

    def filter(self, pod: objects.Pod) -> Refusal | None: ...


@runtime_checkable
class PreEvictionFilterPlugin(Protocol):
    """The last, costlier check just before eviction (nodeFit). None lets it through."""

    name: str

    def pre_eviction_filter(self, pod: objects.Pod) -> Refusal | None: ...


@runtime_checkable
class EvictPlugin(Protocol):
    """Carries out an admitted eviction (Koordinator's evict point).

    `backend` is the framework's (Eviction API unless configured otherwise); a
    plugin that evicts its own way (a PodMigrationJob) ignores it. Never called
    in dry-run mode.
    """

    name: str

    def evict(
        self, pod: objects.Pod, options: EvictOptions, backend: Backend
    ) -> eviction.Result: ...


@runtime_checkable
class EvictorPlugin(FilterPlugin, PreEvictionFilterPlugin, EvictPlugin, Protocol):
    """All three evictor pieces in one plugin (DefaultEvictor)."""


@runtime_checkable
class ControllerPlugin(Protocol):
    """A plugin with a loop of its own; `run` returns when `stop` is set."""

    name: str

    def run(self, stop: threading.Event) -> None: ...


# The Protocol a plugin enabled at each point must implement. preSort and sort
# are accepted by the config loader (upstream spells them) but no in-tree
# plugin serves them and the framework does not run them.
POINT_PROTOCOLS: Mapping[ExtensionPoint, type] = {
    ExtensionPoint.DESCHEDULE: DeschedulePlugin,
    ExtensionPoint.BALANCE: BalancePlugin,
    ExtensionPoint.FILTER: FilterPlugin,
    ExtensionPoint.PRE_EVICTION_FILTER: PreEvictionFilterPlugin,
    ExtensionPoint.EVICT: EvictPlugin,
}
METHODS: Mapping[ExtensionPoint, str] = {
    ExtensionPoint.DESCHEDULE: "deschedule",
    ExtensionPoint.BALANCE: "balance",
    ExtensionPoint.FILTER: "filter",
    ExtensionPoint.PRE_EVICTION_FILTER: "pre_eviction_filter",
    ExtensionPoint.EVICT: "evict",
}


class Evictor(Protocol):
    """What plugins ask of the evictor (`handle.evictor`); see `framework.evictor`."""

    def filter(self, pod: objects.Pod) -> Refusal | None:
        """The profile's filters, ANDed; the first refusal or None."""
        ...

    def pre_eviction_filter(self, pod: objects.Pod) -> Refusal | None:
        """The profile's pre-eviction filters (nodeFit), ANDed."""
        ...

    def evictable(self, pods: Iterable[objects.Pod], *, plugin: str) -> list[objects.Pod]:
        """The pods `filter` lets through; the others are recorded as skipped by `plugin`."""
        ...

    def evict(
        self,
        pod: objects.Pod,
        *,
        plugin: str,
        reason: str,
        destination: str | None = None,
        usage: Resources | None = None,
    ) -> bool:
        """Evict (or in dry-run, pretend to); False, with a recorded reason, when not."""
        ...

    def node_limit_reached(self, node: str) -> bool: ...

    def namespace_limit_reached(self, namespace: str) -> bool: ...

    def total_limit_reached(self) -> bool: ...
