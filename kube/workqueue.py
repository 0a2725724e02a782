"""A keyed work queue for controllers whose workers run in parallel; used by the manager.

    queue = workqueue.KeyedQueue()
    queue.add("n1", time.monotonic())      # informer event: the key is dirty
    item = queue.get(timeout=1.0)          # a worker: ("n1", since) or None
    ...                                    # sync n1 from the caches' latest state
    queue.done("n1")                       # always, in a finally

The semantics are client-go's workqueue (k8s.io/client-go/util/workqueue), which
every controller's worker pool relies on:

- a key waits in the queue once however often it is added: the worker reads the
  latest state when it takes the key, so the latest state wins and the
  intermediate ones cost nothing;
- a key is never handed to two workers at once: added again while a worker holds
  it, it waits until that worker calls `done`, then goes back in the queue, so
  the writes for one object are never in flight together and the last one sent
  carries the latest state;
- keys are served in the order they first became dirty (FIFO), events first:
  `add_background` (a periodic resync that marks every key) queues behind
  every `add`, so 5,000 resync marks never delay a fresh event; an `add` of a
  key waiting in the background moves it up.

Each key carries `since`, the time it first became dirty since it was last
taken (the oldest waiting event), for latency histograms; None when only a
background mark is waiting. Thread-safe; imports nothing of ours.
"""

from __future__ import annotations

import threading
import time


class KeyedQueue:
    """Dirty keys, each served to one worker at a time, oldest first."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queued: dict[str, float] = {}  # events; insertion order = service order
        self._background: dict[str, None] = {}  # resync marks, served after every event
        self._held: set[str] = set()  # handed to a worker, not yet done
        self._again: dict[str, float | None] = {}  # added while held: queued again on done

    def add(self, key: str, since: float) -> None:
        """Mark `key` dirty; a key already waiting keeps its place and its older `since`."""
        with self._cond:
            if key in self._held:
                if self._again.get(key) is None:
                    self._again[key] = since
            elif key not in self._queued:
                self._background.pop(key, None)
                self._queued[key] = since
                self._cond.notify()

    def add_background(self, key: str) -> None:
        """Mark `key` dirty behind every event (a resync); no-op for a key already waiting."""
        with self._cond:
            if key in self._held:
                self._again.setdefault(key, None)
            elif key not in self._queued and key not in self._background:
                self._background[key] = None
                self._cond.notify()

    def get(self, timeout: float | None = None) -> tuple[str, float | None] | None:
        """The oldest dirty key no worker holds (events first), and its `since`; None
        after `timeout`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._queued and not self._background:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                self._cond.wait(remaining)
            since: float | None
            if self._queued:
                key = next(iter(self._queued))
                since = self._queued.pop(key)
            else:
                key = next(iter(self._background))
                since = self._background.pop(key)
            self._held.add(key)
            return key, since

    def done(self, key: str) -> None:
        """The worker finished `key`; if it was added meanwhile, it is queued again (at the end)."""
        with self._cond:
            self._held.discard(key)
            if key not in self._again:
                return
            since = self._again.pop(key)
            if since is None:
                self._background[key] = None
            else:
                self._queued[key] = since
            self._cond.notify()

    def __len__(self) -> int:
        """Keys waiting (held ones not counted)."""
        with self._cond:
            return len(self._queued) + len(self._background)

    @property
    def held(self) -> int:
        """Keys a worker holds now."""
        with self._cond:
            return len(self._held)
