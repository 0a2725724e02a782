"""List-watch caches: a local, indexed, always-converging copy of one resource.

`Informer` does what client-go's reflector + indexer do, in one small class:
the initial state streamed by a watch-list (a WATCH with `sendInitialEvents`,
served from the API server's watch cache) or, where the server refuses one, a
paginated LIST; WATCH with bookmarks from there; relist on 410 Gone (an expired
resourceVersion), reconnect with capped exponential backoff and jitter after
the server goes away, thread-safe reads and named indexes (pods by node, pods
by owner).

A `project` hook turns each raw JSON object into what the caller keeps (a slim
`kube.objects.Pod`, say), so a 150,000-pod cache never holds full objects.

Callers: the agent's states informer (own Node, own Pods, NodeSLO, NodeMetric)
and the descheduler's cluster snapshot.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import gc
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from kube import backoff, rest

log = logging.getLogger(__name__)

T = TypeVar("T")
Indexer = Callable[[T], Iterable[str]]
Handler = Callable[[str, "T | None", "T | None"], None]  # (event, old, new)
RELIST = backoff.Policy(initial=0.5, cap=30.0, jitter=0.5)
"""Delays between failed LISTs/WATCHes: capped exponential, full jitter (client-go's reflector)."""


@dataclass(frozen=True, slots=True)
class Resource:
    """Where a resource lives in the API: core group is ''."""

    group: str
    version: str
    plural: str
    namespaced: bool

    def path(
        self,
        name: str | None = None,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> str:
        return rest.object_path(
            self.group,
            self.version,
            self.plural,
            name,
            namespace=namespace,
            subresource=subresource,
        )


PODS = Resource("", "v1", "pods", True)
NODES = Resource("", "v1", "nodes", False)
PDBS = Resource("policy", "v1", "poddisruptionbudgets", True)
NODEMETRICS = Resource("slo.koordinator.sh", "v1alpha1", "nodemetrics", False)
NODESLOS = Resource("slo.koordinator.sh", "v1alpha1", "nodeslos", False)
PODMIGRATIONJOBS = Resource("scheduling.koordinator.sh", "v1alpha1", "podmigrationjobs", False)

# The annotation on the bookmark that ends a watch-list's initial events (KEP-3157).
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


def object_key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata", {})
    namespace = meta.get("namespace")
    return f"{namespace}/{meta['name']}" if namespace else str(meta["name"])


def _describe(obj: Mapping[str, Any]) -> str:
    try:
        return object_key(obj)
    except (KeyError, TypeError, AttributeError):
        return "(without a name)"


def identity(obj: Mapping[str, Any]) -> Any:
    return obj


_paused_lock = threading.Lock()
_paused = 0  # LISTs running with the collector paused
_resume = False  # whether the last of them turns the collector back on


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a LIST decodes and projects.

    A LIST allocates millions of dicts and lists that reference counting frees
    at once, yet every 700 allocations start a collection, and the older
    generations' ones walk the whole growing cache again: 25% of decoding and
    projecting 30,000 pods (6.6 s -> 4.9 s). The collector is process-wide and
    informers LIST concurrently, so pauses nest: it runs again when the last
    LIST ends, unless it was off before the first began.
    """
    global _paused, _resume
    with _paused_lock:
        if _paused == 0:
            _resume = gc.isenabled()
            gc.disable()
        _paused += 1
    try:
        yield
    finally:
        with _paused_lock:
            _paused -= 1
            if _paused == 0 and _resume:
                gc.enable()


class Informer(Generic[T]):
    """A watched, indexed local copy of one resource. Start it, wait for sync, read it."""

    def __init__(
        self,
        client: rest.Rest,
        resource: Resource,
        *,
        project: Callable[[Mapping[str, Any]], T] = identity,
        indexers: Mapping[str, Indexer[T]] | None = None,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        stream_list: bool = True,
        watch_timeout: int = 300,
        on_event: Handler[T] | None = None,
        name: str | None = None,
    ) -> None:
        self._client = client
        self._resource = resource
        self._project = project
        self._indexers: dict[str, Indexer[T]] = dict(indexers or {})
        self._namespace = namespace
        self._selectors: dict[str, str] = {}
        if label_selector:
            self._selectors["labelSelector"] = label_selector
        if field_selector:
            self._selectors["fieldSelector"] = field_selector
        self._page_size = page_size
        # Streamed initial state until the server refuses it (WatchList off, or
        # an API server older than 1.27); then paginated LISTs for good.
        self.stream_list = stream_list
        self._watch_timeout = watch_timeout
        self._on_event = on_event
        self.name = name or resource.plural

        self._lock = threading.RLock()
        self._items: dict[str, T] = {}
        self._index: dict[str, dict[str, set[str]]] = {n: {} for n in self._indexers}
        self._resource_version = ""
        self._synced = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._backoff = backoff.Backoff(RELIST)
        self._response: Any = None  # the open watch stream, so stop() can cut it
        self.projection_errors = 0  # malformed objects left out of the cache
        self.lists = 0  # how many full LISTs ran (initial + relists); observable in tests
        self.last_error: str | None = None

    # -- reading -------------------------------------------------------------

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    @property
    def resource_version(self) -> str:
        return self._resource_version

    def get(self, key: str) -> T | None:
        with self._lock:
            return self._items.get(key)

    def items(self) -> list[T]:
        with self._lock:
            return list(self._items.values())

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._items)

    def by_index(self, index: str, value: str) -> list[T]:
        with self._lock:
            keys = self._index[index].get(value, ())
            return [self._items[k] for k in keys]

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    # -- running -------------------------------------------------------------

    def start(self) -> Informer[T]:
        """Start (or, after stop(), resume from the last resourceVersion) in a daemon thread."""
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(
                target=self._run,
                args=(not self._synced.is_set(),),
                name=f"informer-{self.name}",
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        response = self._response
        if response is not None:
            try:
                response.shutdown()
            except Exception:  # best effort; the thread also checks _stop
                log.debug("%s: shutting the watch stream down failed", self.name, exc_info=True)
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("%s: the informer thread did not stop within %.0fs", self.name, timeout)

    def _run(self, need_list: bool) -> None:
        while not self._stop.is_set():
            try:
                if need_list and self.stream_list:
                    # The stream goes on as the watch once the initial state is in;
                    # cut short before that, the state is streamed again.
                    if self._watch(listing=True):
                        need_list = False
                    elif not self._stop.is_set():
                        self._failed(
                            rest.ApiUnavailable("the stream ended inside the initial state")
                        )
                    continue
                if need_list:
                    self._list()
                    need_list = False
                self._watch()
            except rest.ApiError as err:
                if need_list and self.stream_list and err.status in (400, 422):
                    log.info(
                        "%s: the API server refuses streamed lists (%s); paginated LISTs from now on",
                        self.name,
                        err,
                    )
                    self.stream_list = False
                    continue
                if err.gone:
                    log.info(
                        "%s: resourceVersion %s expired; relisting",
                        self.name,
                        self._resource_version,
                    )
                    need_list = True
                    continue
                self._failed(err)
            except (rest.ApiUnavailable, ValueError, KeyError) as err:
                if self._stop.is_set():
                    return
                self._failed(err)

    def _failed(self, err: Exception) -> None:
        self.last_error = str(err)
        delay = self._backoff.delay()
        log.warning("%s: %s; retrying in %.1fs", self.name, err, delay)
        self._stop.wait(delay)

    def _list(self) -> None:
        """LIST every page, asking for the next one before projecting this one.

        The fallback where the server will not stream the initial state (see
        `_watch`). The next page's request is sent as soon as its continue token
        is known, so the server reads and encodes it while this thread projects;
        and the cyclic collector is paused (see `collector_paused`).
        """
        started = time.monotonic()
        path = self._resource.path(namespace=self._namespace)
        fresh: dict[str, T] = {}
        query: dict[str, str | int | bool] = {**self._selectors, "limit": self._page_size}
        with (
            concurrent.futures.ThreadPoolExecutor(1, f"{self.name}-list") as fetcher,
            collector_paused(),
        ):
            pending = fetcher.submit(self._client.request, "GET", path, query=dict(query))
            while True:
                page = pending.result()
                meta = page.get("metadata", {})
                more = meta.get("continue")
                if more:
                    query["continue"] = more
                    pending = fetcher.submit(self._client.request, "GET", path, query=dict(query))
                for obj in page.get("items") or ():
                    item = self._safe_project(obj)
                    if item is not None:
                        fresh[object_key(obj)] = item
                if not more:
                    version = str(meta.get("resourceVersion", ""))
                    break
        self._listed(fresh, version, started, "paginated")

    def _listed(self, fresh: dict[str, T], version: str, started: float, how: str) -> None:
        """The whole state is in: it replaces the cache, which is now synced."""
        self._replace(fresh, version)
        seconds = time.monotonic() - started
        log.info("%s: listed %d in %.1fs (%s)", self.name, len(fresh), seconds, how)
        self.lists += 1
        self._synced.set()
        self._backoff.reset()

    def _replace(self, fresh: dict[str, T], version: str) -> None:
        with self._lock:
            old = self._items
            self._items = fresh
            self._index = {n: {} for n in self._indexers}
            for key, item in fresh.items():
                self._add_index(key, item)
            self._resource_version = version
        if self._on_event is not None:
            for key in old.keys() - fresh.keys():
                self._on_event("DELETED", old[key], None)
            for key, item in fresh.items():
                previous = old.get(key)
                self._on_event("ADDED" if previous is None else "MODIFIED", previous, item)

    def _watch(self, *, listing: bool = False) -> bool:
        """Apply a watch stream's events until it ends; whether the state was listed.

        `listing` makes it a watch-list: the server first sends the current state
        as ADDED events from its watch cache, then a bookmark annotated
        INITIAL_EVENTS_END, then the watch goes on. Measured on 150,000 pods on a
        local v1.37 API server, the paginated LIST took 12.9 s of the server's
        time at 500 a page (each page read from etcd) against 4.5 s streamed;
        decoded here too, 17.2 s against 7.4 s.
        """
        started = time.monotonic()
        events = self._events(listing)
        if listing:
            with collector_paused():
                if not self._gather_initial_state(events, started):
                    return False
        self._follow(events)
        return listing

    def _events(self, listing: bool) -> Iterator[tuple[str, Mapping[str, Any]]]:
        """Open the watch (a watch-list when `listing`) and yield its events until it ends or stop()."""
        query: dict[str, str | int | bool] = {
            **self._selectors,
            "watch": True,
            "allowWatchBookmarks": True,
            "timeoutSeconds": self._watch_timeout,
        }
        if listing:
            query |= {"sendInitialEvents": True, "resourceVersionMatch": "NotOlderThan"}
        else:
            query["resourceVersion"] = self._resource_version
        path = self._resource.path(namespace=self._namespace)
        lines = self._client.stream_lines(
            path, query, read_timeout=self._watch_timeout + 30, opened=self._opened
        )
        for line in lines:
            if self._stop.is_set():
                return
            event = json.loads(line)
            kind = str(event.get("type"))
            obj = event.get("object") or {}
            if kind == "ERROR":
                code = int(obj.get("code", 0))
                raise rest.ApiError(
                    code, str(obj.get("reason", "")), str(obj.get("message", "")), obj
                )
            yield kind, obj

    def _gather_initial_state(
        self, events: Iterator[tuple[str, Mapping[str, Any]]], started: float
    ) -> bool:
        """Gather the streamed state aside until INITIAL_EVENTS_END; whether it came whole.

        The gathered objects replace the cache at once, as a LIST's would; a
        stream cut short before the bookmark changes nothing.
        """
        fresh: dict[str, T] = {}
        for kind, obj in events:
            if kind == "BOOKMARK":
                meta = obj.get("metadata", {})
                if (meta.get("annotations") or {}).get(INITIAL_EVENTS_END) == "true":
                    self._listed(fresh, str(meta.get("resourceVersion", "")), started, "streamed")
                    return True
            elif kind == "DELETED":
                fresh.pop(object_key(obj), None)
            elif (item := self._safe_project(obj)) is not None:
                fresh[object_key(obj)] = item
        return False

    def _follow(self, events: Iterator[tuple[str, Mapping[str, Any]]]) -> None:
        """Apply each change to the cache, remembering the resourceVersion to resume from."""
        for kind, obj in events:
            if kind != "BOOKMARK":
                self._apply(kind, obj)
                self._backoff.reset()
            self._resource_version = str(obj.get("metadata", {}).get("resourceVersion", ""))

    def _safe_project(self, obj: Mapping[str, Any]) -> T | None:
        """Project one object; a malformed one is logged, counted and left out.

        One bad object (a NodeMetric with a garbage quantity, say) must cost only
        itself: raising here would fail the whole LIST, or replay the same watch
        event forever, and starve every reader of the cache.
        """
        try:
            return self._project(obj)
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            self.projection_errors += 1
            log.warning("%s: ignoring malformed object %s: %s", self.name, _describe(obj), err)
            return None

    def _opened(self, response: Any) -> None:
        self._response = response
        if self._stop.is_set():
            response.shutdown()

    def _apply(self, kind: str, obj: Mapping[str, Any]) -> None:
        key = object_key(obj)
        new = None if kind == "DELETED" else self._safe_project(obj)
        if new is None and kind != "DELETED":
            kind = "DELETED"  # its latest state is unusable: drop the stale copy too
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._drop_index(key, old)
            if new is not None:
                self._items[key] = new
                self._add_index(key, new)
        if self._on_event is not None:
            self._on_event(kind, old, new)

    def _add_index(self, key: str, item: T) -> None:
        for name, indexer in self._indexers.items():
            bucket = self._index[name]
            for value in indexer(item):
                bucket.setdefault(value, set()).add(key)

    def _drop_index(self, key: str, item: T) -> None:
        for name, indexer in self._indexers.items():
            bucket = self._index[name]
            for value in indexer(item):
                keys = bucket.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del bucket[value]
