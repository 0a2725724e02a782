"""Kubernetes Events (core/v1) so `kubectl describe` shows what nodeqos did and why.

Two writers, the same `event(ref, type, reason, message) -> bool`:

- `Recorder` writes on the caller's thread and correlates repeats: the same
  involved object, type and reason from this component within `window` seconds of
  the first becomes one Event whose `count`, `lastTimestamp` and `message` are
  patched (client-go's EventCorrelator does the same for a controller that says
  the same thing every resync; without it an evicting loop writes one object per
  attempt). Tests and one-shot tools use it.
- `Broadcaster`, a Recorder whose writes happen on its own thread, is what every
  daemon uses: `event()` only puts the Event in a bounded queue, where repeats of
  a pending Event are folded into it (one write for 50 of them), so a controller
  never waits for the API server. A full queue drops the Event and counts it
  (`dropped_metric`, by reason); a write is retried a bounded number of times
  while the API server is away.

Best effort by design: an Event that cannot be written is logged and dropped,
never raised into the caller's control flow (an eviction must not fail because
its Event did).
"""

from __future__ import annotations

import collections
import datetime as dt
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from kube import rest

log = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"

WINDOW = 600.0  # seconds one Event object keeps counting repeats (client-go: 10 minutes)
MAX_SERIES = 4096  # correlated series remembered, oldest forgotten first (client-go's LRU size)
QUEUE_SIZE = 1000  # distinct Events waiting to be written; more are dropped
RETRIES = 3  # further attempts of a write the API server did not answer
BACKOFF = 1.0  # seconds before the first retry, doubled each time
CLOSE_TIMEOUT = 5.0  # seconds close() waits for the queue to drain and the thread to end
MESSAGE_LIMIT = 1024


@dataclass(frozen=True, slots=True)
class ObjectRef:
    kind: str
    name: str
    namespace: str = ""
    uid: str = ""
    api_version: str = "v1"

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ObjectRef:
        meta = obj.get("metadata", {})
        return cls(
            kind=str(obj.get("kind", "")),
            name=str(meta.get("name", "")),
            namespace=str(meta.get("namespace", "")),
            uid=str(meta.get("uid", "")),
            api_version=str(obj.get("apiVersion", "v1")),
        )


@dataclass(frozen=True, slots=True)
class _Key:
    """What makes two Events the same series (the message may differ: the latest wins)."""

    ref: ObjectRef
    event_type: str
    reason: str


@dataclass(slots=True)
class _Series:
    name: str  # the Event object's name
    namespace: str
    first: float  # clock() when the object was created
    count: int


def _timestamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Recorder:
    """Writes Events from one component (e.g. `nodeqos-agent` on node n1), correlated."""

    def __init__(
        self,
        client: rest.Rest,
        component: str,
        host: str = "",
        *,
        window: float = WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self.component = component
        self.host = host
        self.window = window
        self._clock = clock
        self._series: collections.OrderedDict[_Key, _Series] = collections.OrderedDict()
        self._series_lock = threading.Lock()

    def event(self, ref: ObjectRef, event_type: str, reason: str, message: str) -> bool:
        """Write (or count) the Event now; False if the API server did not take it."""
        try:
            self._write(_Key(ref, event_type, reason), message, 1)
        except (rest.ApiError, rest.ApiUnavailable) as err:
            self._log_failure(_Key(ref, event_type, reason), err)
            return False
        return True

    def _write(self, key: _Key, message: str, count: int) -> None:
        """Create the series' Event, or add `count` to the one made within the window.

        Two threads writing the same new series at once may create two objects:
        the cost of not holding a lock across a request, and harmless.
        """
        now = self._clock()
        with self._series_lock:
            series = self._series.get(key)
            if series is not None and now - series.first > self.window:
                series = None
        if series is not None:
            path = rest.object_path("", "v1", "events", series.name, namespace=series.namespace)
            body = {
                "count": series.count + count,
                "lastTimestamp": _timestamp(),
                "message": message[:MESSAGE_LIMIT],
            }
            try:
                self._client.patch(path, body)
            except rest.ApiError as err:
                if not err.not_found:
                    raise
                # deleted meanwhile (an Event's TTL is an hour by default): a new series
            else:
                with self._series_lock:
                    series.count += count
                return
        namespace = key.ref.namespace or "default"
        name = f"{key.ref.name}.{uuid.uuid4().hex[:16]}"
        self._client.create(
            rest.object_path("", "v1", "events", namespace=namespace),
            self._body(key, name, namespace, message, count),
        )
        with self._series_lock:
            self._series[key] = _Series(name, namespace, now, count)
            self._series.move_to_end(key)
            while len(self._series) > MAX_SERIES:
                self._series.popitem(last=False)

    def _body(self, key: _Key, name: str, namespace: str, message: str, count: int) -> rest.JSON:
        ref, stamp = key.ref, _timestamp()
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {
                "kind": ref.kind,
                "name": ref.name,
                "namespace": ref.namespace,
                "uid": ref.uid,
                "apiVersion": ref.api_version,
            },
            "type": key.event_type,
            "reason": key.reason,
            "message": message[:MESSAGE_LIMIT],
            "source": {"component": self.component, "host": self.host},
            "reportingComponent": self.component,
            "reportingInstance": self.host or self.component,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": count,
        }

    @staticmethod
    def _log_failure(key: _Key, err: Exception) -> None:
        ref = key.ref
        log.warning(
            "could not record event %s on %s %s/%s: %s",
            key.reason,
            ref.kind,
            ref.namespace,
            ref.name,
            err,
        )


@dataclass(slots=True)
class _Pending:
    message: str
    count: int


class Broadcaster(Recorder):
    """A Recorder that writes on its own thread from a bounded queue; daemons use it.

    `event()` never blocks on the API server: it folds the Event into a pending
    one of the same series or queues it, and returns False only when it had to
    drop it (queue full, or closed). The thread starts with the first Event;
    `close()` writes what is queued (bounded) and stops it.
    """

    def __init__(
        self,
        client: rest.Rest,
        component: str,
        host: str = "",
        *,
        registry: CollectorRegistry | None = None,
        dropped_metric: str = "nodeqos_events_dropped_total",
        queue_size: int = QUEUE_SIZE,
        retries: int = RETRIES,
        backoff: float = BACKOFF,
        window: float = WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(client, component, host, window=window, clock=clock)
        self.queue_size = queue_size
        self.retries = retries
        self.backoff = backoff
        self._pending: collections.OrderedDict[_Key, _Pending] = collections.OrderedDict()
        self._busy = False  # the thread is writing one it took off the queue
        self._changed = threading.Condition(threading.RLock())
        self._closed = False
        self._stop = threading.Event()  # cuts a retry's backoff short
        self._thread: threading.Thread | None = None
        self.dropped: collections.Counter[str] = collections.Counter()
        self._dropped_metric = (
            Counter(
                dropped_metric,
                "Events not written: queue_full, closed, or failed (after the retries)",
                ["reason"],
                registry=registry,
            )
            if registry is not None
            else None
        )

    def event(self, ref: ObjectRef, event_type: str, reason: str, message: str) -> bool:
        """Queue the Event (or count it into a queued one of its series); False if dropped."""
        key = _Key(ref, event_type, reason)
        with self._changed:
            if self._closed:
                self._drop("closed", key)
                return False
            pending = self._pending.get(key)
            if pending is not None:
                pending.count += 1
                pending.message = message
                return True
            if len(self._pending) >= self.queue_size:
                self._drop("queue_full", key)
                return False
            self._pending[key] = _Pending(message, 1)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"events-{self.component}", daemon=True
                )
                self._thread.start()
            self._changed.notify_all()
        return True

    @property
    def queued(self) -> int:
        """Events waiting to be written (not the one being written)."""
        with self._changed:
            return len(self._pending)

    def flush(self, timeout: float) -> bool:
        """Wait until every queued Event has been written or dropped; False on timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._pending and not self._busy, timeout)

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Refuse new Events, write the queued ones within `timeout`, stop the thread."""
        deadline = time.monotonic() + timeout
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        drained = self.flush(max(0.0, deadline - time.monotonic()))
        self._stop.set()
        with self._changed:
            left = len(self._pending)
            self._pending.clear()
            self._changed.notify_all()
        if not drained:
            log.warning("closing with %d Event(s) not written", left)
            with self._changed:
                self.dropped["closed"] += left
            if self._dropped_metric is not None:
                self._dropped_metric.labels("closed").inc(left)
        if self._thread is not None:
            self._thread.join(max(0.1, deadline - time.monotonic()))
            if self._thread.is_alive():
                log.warning(
                    "%s: the Event writer did not stop in %.0fs", self._thread.name, timeout
                )

    def _drop(self, why: str, key: _Key, detail: object = "") -> None:
        with self._changed:
            self.dropped[why] += 1
        if self._dropped_metric is not None:
            self._dropped_metric.labels(why).inc()
        log.warning(
            "dropped event %s on %s %s/%s: %s%s",
            key.reason,
            key.ref.kind,
            key.ref.namespace,
            key.ref.name,
            why.replace("_", " "),
            f" ({detail})" if detail else "",
        )

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._pending or self._stop.is_set())
                if not self._pending:
                    return  # stopped, nothing left
                key, pending = self._pending.popitem(last=False)
                self._busy = True
            try:
                self._write_retried(key, pending)
            finally:
                with self._changed:
                    self._busy = False
                    self._changed.notify_all()

    def _write_retried(self, key: _Key, pending: _Pending) -> None:
        delay = self.backoff
        for attempt in range(self.retries + 1):
            try:
                self._write(key, pending.message, pending.count)
                return
            except rest.ApiUnavailable as err:
                if attempt == self.retries or self._stop.wait(delay):
                    self._drop("failed", key, err)
                    return
                delay *= 2
            except rest.ApiError as err:  # refused: retrying would be refused again
                self._drop("failed", key, err)
                return
            except Exception as err:
                # The only broad catch: a dead writer thread would silently stop every Event.
                log.exception("writing event %s failed", key.reason)
                self._drop("failed", key, err)
                return
