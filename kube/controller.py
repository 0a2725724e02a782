"""One controller runtime: a rate-limited keyed queue, workers, a resync lane, an outage gate.

    runtime = controller.Controller("batch", sync, keys=nodes.keys, workers=8,
                                    resync_seconds=60.0, synced=informers.synced)
    runtime.add("n1")                                           # an informer event
    runtime.run(stop, may_act)                                  # blocks until `stop`

Used by the manager's three controllers (`manager.reconcile`, `manager.batchresource`,
`manager.profilecontroller`), which read the daemon's one `kube.informerset.Informers`.

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
from collections.abc import Callable, Iterable

from kube import backoff, rest, workqueue

log = logging.getLogger(__name__)

OUTAGE = backoff.Policy(initial=1.0, cap=30.0, jitter=0.5)
"""The outage gate's delays between probes while the API server is unavailable."""
TICK = 0.5
"""Longest wait of the timer and of an idle worker before it looks again (seconds)."""


class Failed(Exception):
    """A sync's own failure with nothing more to say than `str()` (the key is retried)."""


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
