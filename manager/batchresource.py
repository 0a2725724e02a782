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

The informers are views of the process's shared ones (`kube.informerset.Informers`:
Nodes, NodeMetrics and the ConfigMap are watched once, for the reconciler too).
Dirty nodes wait in the work queue of a `kube.controller.Controller` served by
`WORKERS` threads (its resync lane queues every node behind the events):
at 5,000 nodes reporting every 60 s (83 NodeMetric events a second) one serial
patcher spends most of its time waiting on the API server's answer, so the
p99 event -> patch latency grows with the queue (bench/colocation.py). The
queue never hands one node to two workers, so two patches of a node are never
in flight together, and a worker computes a node from the caches' latest state
when it takes it: the latest state wins. A failed patch is retried after the
runtime's per-node backoff (0.5 s doubling to 60 s, at most 2 retries a second
overall); an unavailable API server closes its outage gate (one probe patch per
gate delay), so an outage is not hammered (docs/manager.md, "The controller
runtime and retries").

A `colocation-config` this controller refuses keeps its last good value, is
logged and counted, and turns `nodeqos_manager_config_valid` to 0 until a good
version arrives; with no good value since start, nothing is written (as with
colocation disabled), and the log says why.
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

from kube import cache, controller, events, informerset, objects, rest, slo
from manager import noderesource
from manager.noderesource import batch
from manager.telemetry import Metrics

log = logging.getLogger("manager.batchresource")

COLOCATION_KEY = "colocation-config"
CONSUMER = "batch-controller"
"""This controller's name in `nodeqos_manager_config_valid`'s `ConfigValidity`."""
DEGRADED_REASON = "BatchResourceDegraded"
_BY_NODE = "node"
WORKERS = 8
"""Threads patching Node status at once (the daemon sizes its connection pool for them)."""
# The label values of nodeqos_manager_node_batch_allocatable: one gauge for both tiers, so a
# dashboard of a node's extended allocatable is one query.
_GAUGED = (
    batch.BATCH_CPU,
    batch.BATCH_MEMORY,
    noderesource.mid.MID_CPU,
    noderesource.mid.MID_MEMORY,
)


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
        informers: informerset.Informers | None = None,
    ) -> None:
        self._client = client
        self._metrics = metrics
        self._recorder = recorder
        self._clock = clock
        self.namespace, self.name = namespace, name
        self._lock = threading.Lock()
        self._config_lock = threading.Lock()
        self._last_update: dict[str, datetime] = {}
        self._degraded: set[str] = set()
        self._config_version: str | None = "unset"
        self.config: noderesource.ColocationConfig | None = None
        self.writes = 0
        self.informers_set = informers or informerset.Informers(client)
        shared = self.informers_set
        self.nodes: informerset.View[objects.Node] = shared.watch(
            cache.NODES, label_selector=node_selector
        ).view(objects.Node.from_api, on_event=self._node_event, name="batch-nodes")
        self.pods: informerset.View[objects.Pod] = shared.watch(
            cache.PODS, field_selector="status.phase!=Succeeded,status.phase!=Failed"
        ).view(
            objects.Pod.from_api,
            indexers={_BY_NODE: _pod_node},
            on_event=self._pod_event,
            name="batch-pods",
        )
        self.nodemetrics: informerset.View[slo.NodeMetric] = shared.watch(cache.NODEMETRICS).view(
            slo.NodeMetric.from_api, on_event=self._metric_event, name="batch-nodemetrics"
        )
        # the same watch as the reconciler's (Informers.watch: same resource and selectors)
        self.configmaps: informerset.View[Mapping[str, Any]] = shared.watch(
            cache.Resource("", "v1", "configmaps", True),
            namespace=namespace,
            field_selector=f"metadata.name={name}",
            name="slo-controller-config",
        ).view(on_event=self._all_event, name="batch-colocation-config")
        self.runtime = controller.Controller(
            "batch-resources",
            self._sync,
            keys=self.nodes.keys,
            workers=workers,
            resync_seconds=resync_seconds,
            synced=lambda: self.synced,
        )

    # -- events ------------------------------------------------------------------

    def _mark(self, node: str) -> None:
        self.runtime.add(node)

    def mark_all(self) -> None:
        """Queue every node behind the events (resync, config edit, new leader); these
        syncs observe no latency: no event is waiting on them. Nodes waiting out a
        failure backoff keep waiting."""
        self.runtime.add_all()

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

    def informers(self) -> list[informerset.View[Any]]:
        return [self.nodes, self.pods, self.nodemetrics, self.configmaps]

    def start(self) -> None:
        """Start the informers (every one of the set: it may be this controller's own)."""
        self.informers_set.start()

    def stop(self) -> None:
        self.informers_set.stop()

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
            self._metrics.config.report(CONSUMER, None)
            return
        try:
            self.config = noderesource.parse_colocation_config(text)
        except ValueError as err:
            self._metrics.config_errors.labels(COLOCATION_KEY).inc()
            self._metrics.config.report(CONSUMER, f"{COLOCATION_KEY}: {err}")
            if self.config is not None:
                log.error(
                    "%s/%s: %s: %s; the Batch controller keeps the last good one",
                    self.namespace,
                    self.name,
                    COLOCATION_KEY,
                    err,
                )
                return
            log.error(
                "%s/%s: %s: %s; no good one since start: no Batch resources are written"
                " until it is fixed",
                self.namespace,
                self.name,
                COLOCATION_KEY,
                err,
            )
            self.config = noderesource.ColocationConfig()
            return
        self._metrics.config.report(CONSUMER, None)

    # -- one node ----------------------------------------------------------------

    def sync_node(self, name: str, since: float | None = None) -> bool:
        """Compute one node and write it when needed; True when a write succeeded.

        The caller holds `name` (one worker per node); a failed patch raises (the
        runtime retries the node with backoff).
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
        gauge.labels(name, noderesource.mid.MID_CPU).set(result.wanted.mid.cpu / 1000.0)
        gauge.labels(name, noderesource.mid.MID_MEMORY).set(result.wanted.mid.memory)
        if result.patch is None:
            return False
        with self._lock:
            self.writes += 1
        try:
            self._client.patch(cache.NODES.path(name) + "/status", result.patch)
        except (rest.ApiError, rest.ApiUnavailable) as err:
            log.warning("patch node %s status (batch resources) failed: %s", name, err)
            self._metrics.write_errors.labels("node-status", "patch").inc()
            raise
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
        for resource in _GAUGED:
            with contextlib.suppress(KeyError):
                self._metrics.batch_allocatable.remove(name, resource)

    def _sync(self, name: str, since: float | None) -> None:
        self.sync_node(name, since)

    def drain(self) -> int:
        """Sync every queued node once in the calling thread; returns the syncs run."""
        return self.runtime.drain()

    # -- the loop ----------------------------------------------------------------

    def run(self, stop: threading.Event, may_act: Callable[[], bool]) -> None:
        """Let `WORKERS` threads sync dirty nodes while synced and `may_act()`, mark all
        every resync, retry failures with backoff, until `stop`."""
        self.runtime.run(stop, may_act)
