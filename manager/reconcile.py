"""The reconciler: one NodeSLO and one NodeMetric spec per Node, from the ConfigMap.

The daemon (`manager.daemon`) builds a `Reconciler` on the process's shared
informers (`kube.informerset.Informers`: Nodes, NodeSLOs, NodeMetrics, the one
ConfigMap) and calls `run` in a thread. Level-triggered: any relevant change (a
node added, removed or relabelled, the ConfigMap edited, a NodeSLO edited or
deleted) queues the one key `PASS` in its `kube.controller.Controller`, as does
the resync lane. A pass renders what each node should have, compares it with
the cached object and writes only a difference, so a no-op pass writes nothing
(`writes` counts every write).

A pass with failed writes raises, so the runtime retries it with backoff (0.5 s
doubling to 60 s) rather than at once; a write that finds the API server
unavailable stops the pass's remaining writes and closes the runtime's outage
gate (one probe pass per gate delay: docs/manager.md, "The controller runtime
and retries").

Ownership (docs/manager.md): the manager owns every NodeSLO named after a node
unless its annotation `nodeqos.io/managed-by-manager` is "false"; it adds an
ownerReference to the Node, and deletes the NodeSLOs and NodeMetrics it owns once
their Node is gone (the garbage collector does too where it runs). NodeMetrics
are only ever written through the main resource (never `/status`): a create
with a spec, or a JSON merge patch of `spec`.
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from kube import cache, controller, events, informerset, rest
from manager import render, sloconfig, views
from manager.telemetry import Metrics

log = logging.getLogger("manager.reconcile")
WRITE_WORKERS = 8
"""Threads sending one pass's NodeSLO/NodeMetric writes (the daemon's pool holds them)."""

CONFIG_ERROR_REASON = "SLOConfigInvalid"
PASS = "pass"
"""The reconciler's one work-queue key: a pass covers every node."""


class Reconciler:
    """Informers plus the pass that makes NodeSLOs and NodeMetric specs follow the config."""

    def __init__(
        self,
        client: rest.Rest,
        metrics: Metrics,
        recorder: events.Recorder | None,
        *,
        namespace: str = sloconfig.CONFIGMAP_NAMESPACE,
        name: str = sloconfig.CONFIGMAP_NAME,
        resync_seconds: float = 300.0,
        manage_nodemetrics: bool = True,
        node_selector: str | None = None,
        write_workers: int = WRITE_WORKERS,
        informers: informerset.Informers | None = None,
    ) -> None:
        self._client = client
        self._metrics = metrics
        self._recorder = recorder
        self.namespace, self.name = namespace, name
        self._manage_nodemetrics = manage_nodemetrics
        self.informers_set = informers or informerset.Informers(client)
        shared = self.informers_set
        self.nodes: informerset.View[views.NodeView] = shared.watch(
            cache.NODES, label_selector=node_selector
        ).view(views.NodeView.from_api, on_event=self._node_event)
        self.nodeslos: informerset.View[views.Stored] = shared.watch(cache.NODESLOS).view(
            views.Stored.from_api, on_event=self._poke
        )
        self.nodemetrics: informerset.View[views.Stored] = shared.watch(cache.NODEMETRICS).view(
            views.Stored.from_api, on_event=self._spec_event
        )
        self.configmaps: informerset.View[Mapping[str, Any]] = config_watch(
            shared, namespace, name
        ).view(on_event=self._poke)
        self.runtime = controller.Controller(
            "nodeslo-reconciler",
            self._sync,
            keys=lambda: [PASS],
            resync_seconds=resync_seconds,
            synced=lambda: self.synced,
        )
        self._unavailable: rest.ApiUnavailable | None = None  # this pass's first
        self._failed = 0  # writes of this pass that failed
        self._pass_lock = threading.Lock()  # the writer threads report into the two
        self.config: sloconfig.SLOConfig | None = None
        self.problems: tuple[sloconfig.Problem, ...] = ()
        self._config_version: str | None = "unset"  # the ConfigMap resourceVersion loaded
        self.writes = 0
        # Writes of one pass go out in parallel, so request latency overlaps the
        # client's rate limit (which stays the one cap); the pass waits for them all.
        self._writers = concurrent.futures.ThreadPoolExecutor(
            write_workers, thread_name_prefix="manager-write"
        )
        self._pending: list[concurrent.futures.Future[None]] = []
        self.passes = 0
        self.last_pass_seconds = 0.0

    # -- events ------------------------------------------------------------------

    def _poke(self, _kind: str, _old: object, _new: object) -> None:
        self.runtime.add(PASS)

    def _node_event(
        self, kind: str, old: views.NodeView | None, new: views.NodeView | None
    ) -> None:
        # Heartbeats change a Node every few seconds: only a new, gone, relabelled,
        # re-annotated (bandwidth) or re-created Node matters here (NodeView compares).
        if old is None or new is None or old != new:
            self.runtime.add(PASS)

    def _spec_event(self, kind: str, old: views.Stored | None, new: views.Stored | None) -> None:
        # The agent writes NodeMetric status every report interval: spec only matters.
        if old is None or new is None or old.spec != new.spec:
            self.runtime.add(PASS)

    def informers(self) -> list[informerset.View[Any]]:
        found: list[informerset.View[Any]] = [self.nodes, self.nodeslos, self.configmaps]
        if self._manage_nodemetrics:
            found.append(self.nodemetrics)
        return found

    def start(self) -> None:
        """Start the informers (every one of the set: it may be this reconciler's own)."""
        self.informers_set.start()

    def stop(self) -> None:
        self.informers_set.stop()
        self._writers.shutdown(wait=True, cancel_futures=True)

    @property
    def synced(self) -> bool:
        return all(i.synced for i in self.informers())

    def wake(self) -> None:
        self.runtime.add(PASS)

    # -- config ------------------------------------------------------------------

    def sync_config(self) -> None:
        """Load the ConfigMap when it changed since the last load; report its problems once."""
        obj = self.configmaps.get(f"{self.namespace}/{self.name}")
        version = None if obj is None else str(obj["metadata"].get("resourceVersion", ""))
        if version == self._config_version and self.config is not None:
            return
        self._config_version = version
        data = None if obj is None else (obj.get("data") or {})
        loaded = sloconfig.load(data, self.config)
        self.config = loaded.config
        self.problems = loaded.problems
        self._metrics.config.report(
            "reconciler", "; ".join(p.message for p in loaded.problems) or None
        )
        for warning in loaded.warnings:
            log.warning("%s/%s: %s (ignored)", self.namespace, self.name, warning.message)
        if obj is None:
            log.info("ConfigMap %s/%s not found: the defaults apply", self.namespace, self.name)
        if not loaded.problems:
            return
        for problem in loaded.problems:
            self._metrics.config_errors.labels(problem.key).inc()
            log.error(
                "%s/%s: %s; key %s keeps its last good value",
                self.namespace,
                self.name,
                problem.message,
                problem.key,
            )
        if self._recorder is not None and obj is not None:
            keys = sorted({p.key for p in loaded.problems})
            message = "; ".join(p.message for p in loaded.problems)
            self._recorder.event(
                events.ObjectRef.of({"kind": "ConfigMap", **obj}),
                events.WARNING,
                CONFIG_ERROR_REASON,
                f"{', '.join(keys)} kept their last good values: {message}"[:1000],
            )

    # -- the pass ----------------------------------------------------------------

    def reconcile(self, cancelled: Callable[[], bool] = lambda: False) -> int:
        """One pass over every node; returns how many writes it started.

        The pass waits for its writes; once `cancelled()` (shutdown, or the lease
        lost) the writes not yet sent are dropped and the pass ends.
        """
        started = time.monotonic()
        self._unavailable, self._failed = None, 0
        self.sync_config()
        config = self.config
        before = self.writes
        nodes = {n.name: n for n in self.nodes.items()}
        if config is not None and config.nodeslo_ready:
            self._nodeslos(config, nodes)
        elif config is not None:
            log.warning("a NodeSLO key never had a good value since start: NodeSLOs untouched")
        if self._manage_nodemetrics and config is not None and config.colocation is not None:
            self._nodemetrics(config, nodes)
        self._drain(cancelled)
        self.passes += 1
        self.last_pass_seconds = time.monotonic() - started
        self._metrics.pass_seconds.observe(self.last_pass_seconds)
        return self.writes - before

    def _nodeslos(self, config: sloconfig.SLOConfig, nodes: Mapping[str, views.NodeView]) -> None:
        rendered: dict[tuple[int | str | None, ...], dict[str, Any]] = {}
        for node in nodes.values():
            choice = (*_choice(config, node.labels), node.bandwidth)
            spec = rendered.get(choice)
            if spec is None:
                spec = rendered[choice] = render.nodeslo_spec(config, node.labels, node.bandwidth)
            self._apply(cache.NODESLOS, "nodeslo", self.nodeslos.get(node.name), node, spec)
        self._delete_orphans(cache.NODESLOS, "nodeslo", self.nodeslos.items(), nodes)

    def _nodemetrics(
        self, config: sloconfig.SLOConfig, nodes: Mapping[str, views.NodeView]
    ) -> None:
        for node in nodes.values():
            spec = render.nodemetric_spec(config, node.labels)
            stored = self.nodemetrics.get(node.name)
            self._apply(cache.NODEMETRICS, "nodemetric", stored, node, spec)
        self._delete_orphans(cache.NODEMETRICS, "nodemetric", self.nodemetrics.items(), nodes)

    def _apply(
        self,
        resource: cache.Resource,
        kind: str,
        stored: views.Stored | None,
        node: views.NodeView,
        spec: dict[str, Any],
    ) -> None:
        if stored is None:
            body = {
                "apiVersion": f"{resource.group}/{resource.version}",
                "kind": "NodeSLO" if kind == "nodeslo" else "NodeMetric",
                "metadata": {
                    "name": node.name,
                    "ownerReferences": [render.owner_reference(node.name, node.uid)],
                },
                "spec": spec,
            }
            self._write(kind, "create", lambda: self._client.create(resource.path(), body))
            return
        if stored.opted_out:
            return
        patch: dict[str, Any] = {}
        spec_patch = views.merge_patch(stored.spec, spec)
        if spec_patch:
            patch["spec"] = spec_patch
        refs = views.owner_refs(stored, node)
        if refs is not None:
            patch["metadata"] = {"ownerReferences": refs}
        if not patch:
            return
        # resourceVersion makes the patch conditional: a concurrent edit wins, and the
        # watch event it causes brings this node back in the next pass.
        patch.setdefault("metadata", {})["resourceVersion"] = stored.resource_version
        self._write(
            kind,
            "patch",
            lambda: self._client.patch(resource.path(node.name), patch),
        )

    def _delete_orphans(
        self,
        resource: cache.Resource,
        kind: str,
        stored: list[views.Stored],
        nodes: Mapping[str, views.NodeView],
    ) -> None:
        for item in stored:
            if item.name in nodes or item.opted_out or not item.owned_by_node():
                continue
            if self._node_exists(item.name):  # outside --node-selector, or not seen yet
                continue
            body = {"preconditions": {"resourceVersion": item.resource_version}}
            call = functools.partial(self._client.delete, resource.path(item.name), body)
            self._write(kind, "delete", call)

    def _node_exists(self, name: str) -> bool:
        try:
            self._client.get(cache.NODES.path(name))
        except rest.ApiError as err:
            return not err.not_found
        except rest.ApiUnavailable:
            return True  # unsure: delete nothing
        return True

    def _drain(self, cancelled: Callable[[], bool]) -> None:
        pending, self._pending = self._pending, []
        while pending:
            _done, waiting = concurrent.futures.wait(pending, timeout=0.5)
            pending = list(waiting)
            if pending and cancelled():
                dropped = sum(f.cancel() for f in pending)
                log.info("pass cancelled: %d writes not sent", dropped)
                self.wake()  # whoever leads next starts over
                return

    def _write(self, kind: str, verb: str, call: Callable[[], object]) -> None:
        self.writes += 1
        self._pending.append(self._writers.submit(self._send, kind, verb, call))

    def _send(self, kind: str, verb: str, call: Callable[[], object]) -> None:
        if self._unavailable is not None:
            return  # the server did not answer this pass: the rest wait for the gate
        try:
            call()
        except rest.ApiError as err:
            if err.conflict or err.not_found or err.status == 409:
                log.debug("%s %s: %s (the next pass looks again)", verb, kind, err)
            else:
                log.warning("%s %s failed: %s", verb, kind, err)
            self._metrics.write_errors.labels(kind, verb).inc()
            with self._pass_lock:
                self._failed += 1
        except rest.ApiUnavailable as err:
            log.warning("%s %s: API server unavailable: %s", verb, kind, err)
            self._metrics.write_errors.labels(kind, verb).inc()
            with self._pass_lock:
                self._unavailable = self._unavailable or err
        finally:  # counted once answered, so the metric says what the API server saw
            self._metrics.writes.labels(kind, verb).inc()

    # -- the loop ----------------------------------------------------------------

    def _sync(self, _key: str, _since: float | None) -> None:
        """The runtime's sync: one pass; raises when a write failed (retried with backoff)."""
        self.reconcile(self.runtime.cancelled)
        if self._unavailable is not None:
            raise self._unavailable
        if self._failed:
            raise controller.Failed(f"{self._failed} writes failed")

    def run(self, stop: threading.Event, may_act: Callable[[], bool]) -> None:
        """Pass on every event and every resync while `may_act()`, until `stop`."""
        self.runtime.run(stop, may_act)


def config_watch(informers: informerset.Informers, namespace: str, name: str) -> informerset.Shared:
    """The one watch of the slo-controller-config ConfigMap (the reconciler's and the
    Batch controller's)."""
    return informers.watch(
        cache.Resource("", "v1", "configmaps", True),
        namespace=namespace,
        field_selector=f"metadata.name={name}",
        name="slo-controller-config",
    )


def _choice(config: sloconfig.SLOConfig, labels: Mapping[str, str]) -> tuple[int, ...]:
    """Which strategy of each key a node takes (-1: the cluster's): nodes that agree
    render the same spec, so a 5,000-node pass renders each distinct spec once."""
    found = []
    for strategies in (
        config.threshold,
        config.resource_qos,
        config.cpu_burst,
        config.system,
        config.host_applications,
    ):
        nodes = getattr(strategies, "nodes", ())
        index = next((i for i, n in enumerate(nodes) if n.selector.matches(labels)), -1)
        found.append(index)
    return tuple(found)
