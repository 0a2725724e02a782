"""Shared informers: one informer per resource (and selectors) per process, many consumers.

    informers = informerset.Informers(client)              # the daemon builds one
    nodes = informers.watch(cache.NODES).view(NodeView.from_api, on_event=handler)
    informers.start()
    nodes.get("n1")                                        # this consumer's projection

Used by the manager's three controllers (`manager.reconcile`, `manager.batchresource`,
`manager.profilecontroller`) through the daemon's one set; each of them builds its
own set when run alone (tests). `watch` returns the process's one informer of a
resource and selectors; each consumer adds a `view` with its own projection,
indexers and event handler, so a Node is decoded once and projected once per
consumer, and the handlers fan out from the one watch. Views are added before the
informer is first used.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from kube import cache, rest

log = logging.getLogger(__name__)

T = TypeVar("T")


class View(Generic[T]):
    """One consumer's projection of a shared informer: read like a `cache.Informer`."""

    def __init__(self, shared: Shared, index: int, name: str) -> None:
        self._shared = shared
        self._index = index
        self.name = name

    @property
    def shared(self) -> Shared:
        """The informer this view projects."""
        return self._shared

    @property
    def synced(self) -> bool:
        return self._shared.synced

    @property
    def last_error(self) -> str | None:
        return self._shared.last_error

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self._shared.informer.wait_synced(timeout)

    def get(self, key: str) -> T | None:
        found = self._shared.informer.get(key)
        return None if found is None else found[self._index]

    def items(self) -> list[T]:
        return [item[self._index] for item in self._shared.informer.items()]

    def keys(self) -> list[str]:
        return self._shared.informer.keys()

    def by_index(self, index: str, value: str) -> list[T]:
        found = self._shared.informer.by_index(f"{self._index}/{index}", value)
        return [item[self._index] for item in found]

    def __len__(self) -> int:
        return len(self._shared.informer)


class Shared:
    """The process's one informer of a resource; its items are tuples, one element per view."""

    def __init__(
        self, client: rest.Rest, resource: cache.Resource, name: str | None, **options: Any
    ) -> None:
        self._client = client
        self._resource = resource
        self._options = options
        self._projections: list[Callable[[Mapping[str, Any]], Any]] = []
        self._handlers: list[tuple[int, cache.Handler[Any]]] = []
        self._indexers: dict[str, cache.Indexer[tuple[Any, ...]]] = {}
        self._informer: cache.Informer[tuple[Any, ...]] | None = None
        self._lock = threading.Lock()
        self.name = name or resource.plural

    @property
    def informer(self) -> cache.Informer[tuple[Any, ...]]:
        """The informer, built at first use: no view can be added after that."""
        with self._lock:
            if self._informer is None:
                self._informer = cache.Informer(
                    self._client,
                    self._resource,
                    project=self._project,
                    indexers=self._indexers,
                    on_event=self._fan_out,
                    name=self.name,
                    **self._options,
                )
            return self._informer

    def view(
        self,
        project: Callable[[Mapping[str, Any]], T] = cache.identity,
        *,
        indexers: Mapping[str, cache.Indexer[T]] | None = None,
        on_event: cache.Handler[T] | None = None,
        name: str | None = None,
    ) -> View[T]:
        """A consumer's projection (and indexers, handler); only before the informer is
        first used (read or started)."""
        with self._lock:
            if self._informer is not None:
                raise RuntimeError(f"informer {self.name}: views are added before it is used")
            index = len(self._projections)
            self._projections.append(project)
            for key, indexer in (indexers or {}).items():
                self._indexers[f"{index}/{key}"] = _element(indexer, index)
            if on_event is not None:
                self._handlers.append((index, on_event))
        return View(self, index, name or self.name)

    def _project(self, obj: Mapping[str, Any]) -> tuple[Any, ...]:
        # one malformed projection drops the object for every view (cache._safe_project)
        return tuple(project(obj) for project in self._projections)

    def _fan_out(self, kind: str, old: tuple[Any, ...] | None, new: tuple[Any, ...] | None) -> None:
        for index, handler in self._handlers:
            try:
                handler(
                    kind,
                    None if old is None else old[index],
                    None if new is None else new[index],
                )
            except Exception:  # one consumer's handler never starves the others
                log.exception("informer %s: event handler %d failed", self.name, index)

    @property
    def synced(self) -> bool:
        return self.informer.synced

    @property
    def last_error(self) -> str | None:
        return self.informer.last_error

    def start(self) -> None:
        self.informer.start()

    def stop(self) -> None:
        self.informer.stop()


def _element(indexer: cache.Indexer[T], index: int) -> cache.Indexer[tuple[Any, ...]]:
    return lambda item: indexer(item[index])


class Informers:
    """One informer per resource and selectors per process: `watch` it, `start` them all."""

    def __init__(self, client: rest.Rest) -> None:
        self._client = client
        self._shared: dict[tuple[object, ...], Shared] = {}
        self._lock = threading.Lock()

    def watch(
        self,
        resource: cache.Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        name: str | None = None,
    ) -> Shared:
        key = (resource, namespace, label_selector, field_selector)
        with self._lock:
            found = self._shared.get(key)
            if found is None:
                found = self._shared[key] = Shared(
                    self._client,
                    resource,
                    name,
                    namespace=namespace,
                    label_selector=label_selector,
                    field_selector=field_selector,
                )
            return found

    def all(self) -> list[Shared]:
        with self._lock:
            return list(self._shared.values())

    def start(self) -> None:
        for shared in self.all():
            shared.informer.start()

    def stop(self) -> None:
        for shared in self.all():
            shared.informer.stop()

    def synced(self) -> bool:
        return all(shared.synced for shared in self.all())
