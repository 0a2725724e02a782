"""One controller runtime: shared informers, a rate-limited keyed queue, workers, a resync lane.

    informers = controller.Informers(client)                  # one per process
    nodes = informers.watch(cache.NODES).view(NodeView.from_api, on_event=...)
    runtime = controller.Controller("batch", sync, keys=nodes.keys, workers=8,
                                    resync_seconds=60.0, synced=informers.synced)
    informers.start()
    runtime.run(stop, may_act)                                  # blocks until `stop`

Used by the manager's three controllers (`manager.reconcile`, `manager.batchresource`,
`manager.profilecontroller`); the daemon builds the one `Informers` they share.

Informers: `watch` returns the process's one informer of a resource (and selectors);
each consumer adds a `view` with its own projection, indexers and event handler,
so a Node is decoded once and projected once per consumer, and the handlers fan
out from the one watch. Views are added before `start`.

The queue is `kube.workqueue.KeyedQueue` (a key waits once, is never synced by two
workers at once, events before resync marks). `sync(key, since)` returning is a
success (the key's failure count is forgotten); raising sends the key back:

- `rest.ApiUnavailable` (connection refused, reset, timeout: the API server, not
  the object) closes the controller's outage gate: no worker takes a key until
  the gate's delay (`OUTAGE`: 1 s doubling to 30 s, jittered) has passed, then
  exactly one worker probes with one key; a success opens the gate for all, a
  failure closes it for the next, longer delay. The key goes back without
  counting against it. So an outage costs a controller at most its workers' syncs
  in flight when it began plus one sync per gate delay (docs/manager.md).
- `rest.WriteRefused` (this replica stopped leading) sends the key back to wait
  for `may_act()`.
- any other exception is the object's failure: it is logged and the key comes
  back after the rate limiter's delay (`kube.backoff.controller_limiter`: per
  key 0.5 s doubling to 60 s, at most 2 retries a second overall).

The resync lane marks every key of `keys()` behind the events every
`resync_seconds`, except keys waiting out a failure backoff (a resync does not cut
a backoff short). Every wait is bounded; the clock and random source are
injectable, and `tick` / `process` let tests drive the runtime without threads.
"""

from __future__ import annotations

import heapq
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar

from kube import backoff, cache, rest, workqueue

log = logging.getLogger(__name__)

T = TypeVar("T")
OUTAGE = backoff.Policy(initial=1.0, cap=30.0, jitter=0.5)
"""The outage gate's delays between probes while the API server is unavailable."""
TICK = 0.5
"""Longest wait of the timer and of an idle worker before it looks again (seconds)."""


class Failed(Exception):
    """A sync's own failure with nothing more to say than `str()` (the key is retried)."""


# -- shared informers ---------------------------------------------------------


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


# -- the outage gate ------------------------------------------------------------


class Gate:
    """Open, or closed until a time; after it one caller probes, and its verdict decides."""

    def __init__(
        self,
        policy: backoff.Policy = OUTAGE,
        *,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self._backoff = backoff.Backoff(policy, rand)
        self._clock = clock
        self._cond = threading.Condition()
        self._until: float | None = None  # None: open
        self._probing = False
        self.closings = 0  # how many times it closed (an outage's probes, observable)

    @property
    def open(self) -> bool:
        with self._cond:
            return self._until is None

    def acquire(self, timeout: float) -> bool | None:
        """Whether the caller may sync: True (open), None (it is the probe), False
        (closed still, after waiting at most `timeout`)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                if self._until is None:
                    return True
                if not self._probing and self._clock() >= self._until:
                    self._probing = True
                    return None
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                wait = remaining if self._probing else min(remaining, self._until - self._clock())
                self._cond.wait(max(0.0, min(wait, TICK)))

    def succeeded(self) -> None:
        with self._cond:
            if self._until is not None:
                log.info("API server reachable again: the gate opens")
            self._until, self._probing = None, False
            self._backoff.reset()
            self._cond.notify_all()

    def unavailable(self, probe: bool) -> float:
        """The API server did not answer: closed for the next delay, which is returned.
        Syncs that were in flight when the gate closed do not lengthen it: only the
        first failure of an outage and each failed probe do."""
        with self._cond:
            if self._until is not None and not probe:
                return max(0.0, self._until - self._clock())
            delay = self._backoff.delay()
            self._until, self._probing = self._clock() + delay, False
            self.closings += 1
            self._cond.notify_all()
            return delay

    def no_verdict(self) -> None:
        """The probe took no key (or was refused locally): someone else probes."""
        with self._cond:
            self._probing = False
            self._cond.notify_all()


# -- the runtime ------------------------------------------------------------------


class Controller:
    """A keyed queue of dirty keys, synced by `workers` threads while `may_act()`."""

    def __init__(
        self,
        name: str,
        sync: Callable[[str, float | None], None],
        *,
        keys: Callable[[], Iterable[str]],
        workers: int = 1,
        resync_seconds: float = 300.0,
        synced: Callable[[], bool] = lambda: True,
        limiter: backoff.RateLimiter | None = None,
        outage: backoff.Policy = OUTAGE,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.name = name
        self._sync = sync
        self._keys = keys
        self._workers = workers
        self.resync_seconds = resync_seconds
        self._synced = synced
        self._clock = clock
        self.limiter = limiter or backoff.controller_limiter(clock=clock, rand=rand)
        self.gate = Gate(outage, clock=clock, rand=rand)
        self.queue = workqueue.KeyedQueue()
        self._lock = threading.Lock()
        self._delayed: list[tuple[float, int, str, float | None]] = []  # heap: due, seq, key
        self._due: dict[str, float] = {}  # key -> due time of its live delayed entry
        self._seq = 0
        self._next_resync = clock() + resync_seconds
        self._tick = threading.Event()
        self._active = threading.Event()  # synced and may act: workers take keys
        self._stop = threading.Event()
        self._may_act: Callable[[], bool] = lambda: True
        self.syncs = 0
        self.failures = 0  # syncs that raised (outage included)

    # -- adding keys -------------------------------------------------------------

    def add(self, key: str) -> None:
        """An event: `key` is dirty now (a delayed retry of it is superseded)."""
        if not key:
            return
        with self._lock:
            self._due.pop(key, None)
        self.queue.add(key, time.monotonic())

    def add_after(self, key: str, delay: float, since: float | None = None) -> None:
        """`key` is dirty in `delay` seconds (a retry)."""
        with self._lock:
            due = self._clock() + delay
            self._seq += 1
            heapq.heappush(self._delayed, (due, self._seq, key, since))
            self._due[key] = due
        self._tick.set()

    def add_rate_limited(self, key: str, since: float | None = None) -> float:
        delay = self.limiter.when(key)
        self.add_after(key, delay, since)
        return delay

    def add_all(self) -> None:
        """Mark every key behind the events, except keys waiting out a failure backoff."""
        with self._lock:
            waiting = set(self._due)
        for key in self._keys():
            if key not in waiting:
                self.queue.add_background(key)

    def retrying(self, key: str) -> bool:
        """Whether `key` waits out a failure backoff."""
        with self._lock:
            return key in self._due

    def wake(self) -> None:
        """Look at leadership and the timers now (a new leader passes at once)."""
        self._tick.set()

    # -- the timer ---------------------------------------------------------------

    def tick(self) -> float:
        """Queue the due retries and, when due, the resync; seconds until the next timer."""
        now = self._clock()
        with self._lock:
            due: list[tuple[str, float | None]] = []
            while self._delayed and self._delayed[0][0] <= now:
                when, _seq, key, since = heapq.heappop(self._delayed)
                if self._due.get(key) == when:  # not superseded by an event or later retry
                    del self._due[key]
                    due.append((key, since))
            next_due = self._delayed[0][0] if self._delayed else None
        for key, since in due:
            if since is None:
                self.queue.add_background(key)
            else:
                self.queue.add(key, since)
        if now >= self._next_resync:
            self._next_resync = now + self.resync_seconds
            self.add_all()
        timers = [self._next_resync - now] + ([] if next_due is None else [next_due - now])
        return max(0.0, min(timers))

    # -- syncing -----------------------------------------------------------------

    def process(self, timeout: float) -> bool:
        """Take one key (waiting at most `timeout` for the gate and the queue) and sync
        it; whether a key was synced."""
        admitted = self.gate.acquire(timeout)
        if admitted is False:
            return False
        item = self.queue.get(timeout=timeout)
        if item is None:
            if admitted is None:
                self.gate.no_verdict()
            return False
        key, since = item
        verdict: bool | None = None  # True: reached the API server; False: it was unavailable
        try:
            self._sync(key, since)
            verdict = True
            self.limiter.forget(key)
        except rest.WriteRefused:
            self.failures += 1
            self._requeue(key, since)  # waits for may_act(); not an outage, not the object's
            self._active.clear()  # no worker retries it until the timer sees may_act() again
        except rest.ApiUnavailable as err:
            self.failures += 1
            verdict = False
            self._requeue(key, since)
            delay = self.gate.unavailable(probe=admitted is None)
            log.warning(
                "%s: API server unavailable (%s); no sync for %.1fs, then one probe",
                self.name,
                err,
                delay,
            )
        except Exception as err:
            self.failures += 1
            verdict = True  # the server answered, or our own code failed: not an outage
            delay = self.add_rate_limited(key, since)
            log.warning("%s: sync %s failed: %s; retrying in %.1fs", self.name, key, err, delay)
        finally:
            self.syncs += 1
            self.queue.done(key)
            if verdict is True:
                self.gate.succeeded()
            elif verdict is None:
                self.gate.no_verdict()
        return True

    def _requeue(self, key: str, since: float | None) -> None:
        # queued again once `done` runs (the key is held now)
        if since is None:
            self.queue.add_background(key)
        else:
            self.queue.add(key, since)

    def drain(self) -> int:
        """Sync every key queued now in the calling thread (tests, benchmarks); the count."""
        done = 0
        for _ in range(len(self.queue)):
            if not self.process(timeout=0):
                break
            done += 1
        return done

    def cancelled(self) -> bool:
        """Whether a running sync should give up: stopping, or no longer allowed to act."""
        return self._stop.is_set() or not self._active.is_set() or not self._may_act()

    # -- running -----------------------------------------------------------------

    def _work(self) -> None:
        while not self._stop.is_set():
            if not self._active.wait(TICK):
                continue
            try:
                self.process(TICK)
            except Exception:  # process isolates sync; this is the runtime's own bug
                log.exception("%s: worker", self.name)
                self._stop.wait(TICK)

    def run(self, stop: threading.Event, may_act: Callable[[], bool]) -> None:
        """Workers sync keys while `synced()` and `may_act()`; the calling thread runs the
        timers; returns (workers joined, bounded) once `stop` is set."""
        self._stop = stop
        self._may_act = may_act
        threads = [
            threading.Thread(target=self._work, name=f"{self.name}-{i}", daemon=True)
            for i in range(self._workers)
        ]
        for thread in threads:
            thread.start()
        try:
            while not stop.is_set():
                was_active = self._active.is_set()
                if self._synced() and may_act():
                    self._active.set()
                    if not was_active:
                        self.add_all()  # a new leader (or newly synced) looks at everything
                else:
                    self._active.clear()
                self._tick.wait(min(TICK, self.tick()))
                self._tick.clear()
        finally:
            self._active.clear()
            self.gate.no_verdict()
            for thread in threads:
                thread.join(5.0)
