"""The Batch resources controller: measured slack becomes `kubernetes.io/batch-*` on Nodes.

It writes the Mid resources (`kubernetes.io/mid-*`, `noderesource.mid`) in the same
patch, under the same rules: "batch" below stands for both.

Imports `kube` and `manager.noderesource` / `manager.telemetry` only.

Informers on Nodes, Pods (indexed by node), NodeMetrics and the
slo-controller-config ConfigMap (`colocation-config` key) mark a node dirty; the
leader's loop computes each dirty node's batch-cpu (millicores, as Koordinator
writes it) and batch-memory (bytes) with `noderesource.calculate` and, only when
`noderesource.needs_update` says so, sends a JSON merge patch of the two keys in
`status.capacity` and `status.allocatable` to `nodes/<name>/status`: the
kubelet's fields are never in the body. A NodeMetric older than
`degradeTimeMinutes` sets both to 0 (docs/deviations.md `batch-degrade-zero`),
with a Warning Event on the Node when the node starts degrading. A periodic
resync marks every node dirty so degradation and the update interval apply
without events. With colocation disabled (or the key absent) nothing is written.

Dirty nodes wait in a `kube.workqueue.KeyedQueue` served by `WORKERS` threads (a
resync queues every node behind the events):
at 5,000 nodes reporting every 60 s (83 NodeMetric events a second) one serial
patcher spends most of its time waiting on the API server's answer, so the
p99 event -> patch latency grows with the queue (bench/colocation.py). The
queue never hands one node to two workers, so two patches of a node are never
in flight together, and a worker computes a node from the caches' latest state
when it takes it: the latest state wins. A failed patch is retried on the
loop's next tick (<= 1 s), not at once, so an API outage is not hammered.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kube import cache, events, objects, rest, slo, workqueue
from manager import noderesource
from manager.noderesource import batch
from manager.telemetry import Metrics

log = logging.getLogger("manager.batchresource")

COLOCATION_KEY = "colocation-config"
DEGRADED_REASON = "BatchResourceDegraded"
_BY_NODE = "node"
WORKERS = 8
"""Threads patching Node status at once (the daemon sizes its connection pool for them)."""


def _pod_node(pod: objects.Pod) -> list[str]:
    return [pod.node_name] if pod.node_name else []


@dataclass(frozen=True, slots=True)
class Plan:
    """What one node needs: the computed value and the patch body (None: no write)."""

    wanted: noderesource.NodeAllocatable
    patch: dict[str, Any] | None


def status_patch(wanted: noderesource.NodeAllocatable) -> dict[str, Any]:
    """The merge patch body for `nodes/<name>/status`: only the batch and mid keys."""
    values = {name: str(value) for name, value in wanted.as_resources().items()}
    return {"status": {"capacity": dict(values), "allocatable": dict(values)}}


def plan(
    strategy: noderesource.ColocationStrategy,
    node: objects.Node,
    pods: list[objects.Pod],
    metric: slo.NodeMetric | None,
    last_update: datetime | None,
    now: datetime,
) -> Plan:
    """The node's batch and mid resources and whether to write them (pure)."""
    wanted = noderesource.allocatable.calculate(strategy, node, pods, metric, now)
    current = {
        name: node.allocatable[name] for name in wanted.as_resources() if name in node.allocatable
    }
    if not noderesource.needs_update(strategy, current, wanted, last_update, now):
        return Plan(wanted, None)
    return Plan(wanted, status_patch(wanted))


class BatchController:
    """Informers plus the per-node loop that writes batch-cpu/batch-memory."""

    def __init__(
        self,
        client: rest.Rest,
        metrics: Metrics,
        recorder: events.Recorder | None,
        *,
        namespace: str,
        name: str,
        resync_seconds: float = 60.0,
        node_selector: str | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        workers: int = WORKERS,
    ) -> None:
        self._client = client
        self._workers = workers
        self._metrics = metrics
        self._recorder = recorder
        self._resync = resync_seconds
        self._clock = clock
        self.namespace, self.name = namespace, name
        self._lock = threading.Lock()
        self._config_lock = threading.Lock()
        self._queue = workqueue.KeyedQueue()  # node -> monotonic time of the first event
        self._retry: dict[str, float | None] = {}  # failed patches, queued on the next tick
        self._active = threading.Event()  # synced and leading: workers may take nodes
        self._wake = threading.Event()
        self._last_update: dict[str, datetime] = {}
        self._degraded: set[str] = set()
        self._config_version: str | None = "unset"
        self.config: noderesource.ColocationConfig | None = None
        self.writes = 0
        self.nodes: cache.Informer[objects.Node] = cache.Informer(
            client,
            cache.NODES,
            project=objects.Node.from_api,
            on_event=self._node_event,
            label_selector=node_selector,
            name="batch-nodes",
        )
        self.pods: cache.Informer[objects.Pod] = cache.Informer(
            client,
            cache.PODS,
            project=objects.Pod.from_api,
            indexers={_BY_NODE: _pod_node},
            on_event=self._pod_event,
            field_selector="status.phase!=Succeeded,status.phase!=Failed",
            name="batch-pods",
        )
        self.nodemetrics: cache.Informer[slo.NodeMetric] = cache.Informer(
            client,
            cache.NODEMETRICS,
            project=slo.NodeMetric.from_api,
            on_event=self._metric_event,
            name="batch-nodemetrics",
        )
        self.configmaps: cache.Informer[Mapping[str, Any]] = cache.Informer(
            client,
            cache.Resource("", "v1", "configmaps", True),
            namespace=namespace,
            field_selector=f"metadata.name={name}",
            on_event=self._all_event,
            name="batch-colocation-config",
        )

    # -- events ------------------------------------------------------------------

    def _mark(self, node: str) -> None:
        if node:
            self._queue.add(node, time.monotonic())

    def mark_all(self) -> None:
        """Queue every node behind the events (resync, config edit, new leader); these
        syncs observe no latency: no event is waiting on them."""
        for key in list(self.nodes.keys()):
            self._queue.add_background(key)
        self._wake.set()

    def _all_event(self, _kind: str, _old: object, _new: object) -> None:
        self.mark_all()

    def _node_event(self, _kind: str, old: objects.Node | None, new: objects.Node | None) -> None:
        # Heartbeats touch conditions only: capacity, allocatable, labels or annotations matter.
        if old is None or new is None:
            self._mark((new or old).name if (new or old) is not None else "")  # type: ignore[union-attr]
            return
        if (old.capacity, old.allocatable, old.labels, old.annotations) != (
            new.capacity,
            new.allocatable,
            new.labels,
            new.annotations,
        ):
            self._mark(new.name)

    def _pod_event(self, _kind: str, old: objects.Pod | None, new: objects.Pod | None) -> None:
        for pod in (old, new):
            if pod is not None:
                self._mark(pod.node_name)

    def _metric_event(
        self, _kind: str, old: slo.NodeMetric | None, new: slo.NodeMetric | None
    ) -> None:
        found = new or old
        if found is not None:
            self._mark(found.name)

    def informers(self) -> list[cache.Informer[Any]]:
        return [self.nodes, self.pods, self.nodemetrics, self.configmaps]

    def start(self) -> None:
        for informer in self.informers():
            informer.start()

    def stop(self) -> None:
        for informer in self.informers():
            informer.stop()

    @property
    def synced(self) -> bool:
        return all(i.synced for i in self.informers())

    def wake(self) -> None:
        self.mark_all()

    # -- config ------------------------------------------------------------------

    def sync_config(self) -> None:
        """Parse `colocation-config` when the ConfigMap changed; a bad one keeps the last good."""
        with self._config_lock:  # the workers call it before each node
            self._sync_config()

    def _sync_config(self) -> None:
        obj = self.configmaps.get(f"{self.namespace}/{self.name}")
        version = None if obj is None else str(obj["metadata"].get("resourceVersion", ""))
        if version == self._config_version:
            return
        self._config_version = version
        text = None if obj is None else (obj.get("data") or {}).get(COLOCATION_KEY)
        if not text:
            self.config = noderesource.ColocationConfig()
            return
        try:
            self.config = noderesource.parse_colocation_config(text)
        except ValueError as err:
            log.error(
                "%s/%s: %s; the last good colocation-config stays", self.namespace, self.name, err
            )
            self._metrics.config_errors.labels(COLOCATION_KEY).inc()
            if self.config is None:
                self.config = noderesource.ColocationConfig()

    # -- one node ----------------------------------------------------------------

    def sync_node(self, name: str, since: float | None = None) -> bool:
        """Compute one node and write it when needed; True when a write succeeded.

        The caller holds `name` (one worker per node); a failed patch puts the
        node in the retry set the loop queues again on its next tick.
        """
        self.sync_config()
        config = self.config or noderesource.ColocationConfig()
        node = self.nodes.get(name)
        if node is None:
            self._forget(name)
            return False
        strategy = config.for_node(node.labels)
        if not strategy.enable:
            return False
        now = self._clock()
        pods = self.pods.by_index(_BY_NODE, name)
        metric = self.nodemetrics.get(name)
        result = plan(strategy, node, pods, metric, self._last_update.get(name), now)
        self._degrade_state(node, result.wanted)
        gauge = self._metrics.batch_allocatable
        gauge.labels(name, batch.BATCH_CPU).set(result.wanted.batch.cpu / 1000.0)
        gauge.labels(name, batch.BATCH_MEMORY).set(result.wanted.batch.memory)
        if result.patch is None:
            return False
        with self._lock:
            self.writes += 1
        try:
            self._client.patch(cache.NODES.path(name) + "/status", result.patch)
        except (rest.ApiError, rest.ApiUnavailable) as err:
            log.warning("patch node %s status (batch resources) failed: %s", name, err)
            self._metrics.write_errors.labels("node-status", "patch").inc()
            with self._lock:
                self._retry.setdefault(name, since)
            return False
        finally:
            self._metrics.writes.labels("node-status", "patch").inc()
        self._last_update[name] = now
        if since is not None:
            self._metrics.batch_latency.observe(time.monotonic() - since)
        return True

    def _degrade_state(self, node: objects.Node, wanted: noderesource.NodeAllocatable) -> None:
        if wanted.degraded is None:
            self._degraded.discard(node.name)
        elif node.name not in self._degraded:
            self._degraded.add(node.name)
            log.warning(
                "node %s: batch and mid resources degraded to 0: %s", node.name, wanted.degraded
            )
            if self._recorder is not None:
                ref = events.ObjectRef(kind="Node", name=node.name, uid=node.uid)
                self._recorder.event(
                    ref,
                    events.WARNING,
                    DEGRADED_REASON,
                    f"batch-cpu/batch-memory and mid-cpu/mid-memory set to 0: {wanted.degraded}",
                )
        self._metrics.batch_degraded.set(len(self._degraded))

    def _forget(self, name: str) -> None:
        self._last_update.pop(name, None)
        self._degraded.discard(name)
        self._metrics.batch_degraded.set(len(self._degraded))
        for resource in (batch.BATCH_CPU, batch.BATCH_MEMORY):
            with contextlib.suppress(KeyError):
                self._metrics.batch_allocatable.remove(name, resource)

    def _sync_held(self, name: str, since: float | None) -> bool:
        try:
            return self.sync_node(name, since)
        except Exception:  # one malformed node never stops the others
            log.exception("batch resources of node %s", name)
            return False
        finally:
            self._queue.done(name)

    def drain(self) -> int:
        """Sync every queued node once in the calling thread; returns the writes sent."""
        written = 0
        for _ in range(len(self._queue)):
            item = self._queue.get(timeout=0)
            if item is None:
                break
            written += self._sync_held(*item)
        return written

    def requeue_failed(self) -> None:
        """Queue again the nodes whose patch failed since the last call."""
        with self._lock:
            failed, self._retry = self._retry, {}
        for name, since in failed.items():
            if since is None:
                self._queue.add_background(name)
            else:
                self._queue.add(name, since)

    # -- the loop ----------------------------------------------------------------

    def _work(self, stop: threading.Event) -> None:
        while not stop.is_set():
            if not self._active.wait(1.0):
                continue
            item = self._queue.get(timeout=1.0)
            if item is not None:
                self._sync_held(*item)

    def run(self, stop: threading.Event, may_act: Callable[[], bool]) -> None:
        """Let `WORKERS` threads sync dirty nodes while synced and `may_act()`, mark all
        every resync and queue failed patches again every tick, until `stop`."""
        workers = [
            threading.Thread(
                target=self._work, args=(stop,), name=f"batch-resources-{i}", daemon=True
            )
            for i in range(self._workers)
        ]
        for worker in workers:
            worker.start()
        next_resync = time.monotonic() + self._resync
        try:
            while not stop.is_set():
                self._wake.wait(min(1.0, max(0.0, next_resync - time.monotonic())))
                self._wake.clear()
                if stop.is_set():
                    return
                if time.monotonic() >= next_resync:
                    next_resync = time.monotonic() + self._resync
                    self.mark_all()
                if self.synced and may_act():
                    self.requeue_failed()
                    self._active.set()
                else:
                    self._active.clear()
        finally:
            self._active.clear()
            for worker in workers:
                worker.join(5.0)
