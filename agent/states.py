"""The states informer: this node's Node, Pods, NodeSLO and NodeMetric, list-watched.

`States` runs four `kube.cache.Informer`s, each narrowed by a field selector
to what concerns this node (koordlet's statesinformer watches the same four):

- the Node (`metadata.name`), as a `kube.objects.Node`;
- the Pods bound to it (`spec.nodeName`), projected at once to
  `qosmanager.states.PodMeta` (the slim pod view plus its cgroup directories
  for the node's cgroup driver), so neither a full pod object nor raw JSON is
  kept; the collectors (`agent.discovery.ClusterDiscovery`), the NodeMetric
  reporter and the QoS plugins all read these;
- the NodeSLO (`metadata.name`), merged over Koordinator's defaults by
  `NodeSLOState`;
- the NodeMetric (`metadata.name`), kept raw: the reporter reads its spec and
  writes its status on top of it, so fields we do not model survive.

`States` implements `qosmanager.states.States` for the QoS plugins.

Nobody waits on all of this (docs/design.md, "Beyond the reference" 7): each
informer is its own `/healthz` component (`states/node`, `states/pods`,
`states/nodeslo`, `states/nodemetric`) and turns ready when its first LIST
arrived; collection starts at once with whatever pods are known, and the
reporter works without the NodeMetric informer (it GETs). A node without a
NodeSLO syncs like any other (an empty list), and its spec is the defaults; a
cluster without the NodeSLO CRD leaves only `states/nodeslo` not ready.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

import cgroups
from agent import health
from kube import cache, events, nodeslo, objects, rest, slo
from qosmanager import states as qstates

log = logging.getLogger(__name__)

INVALID_NODESLO_REASON = "InvalidNodeSLO"
_HEALTH_PERIOD = 1.0  # seconds between two refreshes of the informers' /healthz lines

# (NodeSLO object, its errors) -> report them; `NodeSLOState` calls it once per bad spec.
InvalidReporter = Callable[[Mapping[str, Any], list[str]], None]


def _defaults() -> nodeslo.NodeSLOSpec:
    # merge_over_defaults, not NodeSLOSpec.defaults(): the merge derives the lower
    # watermarks (memoryEvictLowerPercent = threshold - 2) the plugins read.
    spec, errors = nodeslo.merge_over_defaults(None)
    assert not errors, errors  # the defaults are ours
    return spec


class NodeSLOState:
    """The NodeSLO spec in force for this node.

    - no NodeSLO (never created, or deleted): Koordinator's defaults;
    - a valid NodeSLO: its spec merged over the defaults;
    - a malformed one (any field with a wrong type, range or enum value): the
      spec in force stays as it was (the last good one, or the defaults) and
      `report_invalid` is told once per distinct bad spec, not on every relist.

    Thread-safe for readers: the spec is replaced, never mutated.
    """

    __slots__ = ("_bad", "_report_invalid", "_spec")

    def __init__(self, report_invalid: InvalidReporter) -> None:
        self._report_invalid = report_invalid
        self._spec = _defaults()
        self._bad: str | None = None  # the last bad spec reported, as canonical JSON

    @property
    def spec(self) -> nodeslo.NodeSLOSpec:
        """The merged spec in force."""
        return self._spec

    def apply(self, obj: Mapping[str, Any] | None) -> None:
        """Take the node's NodeSLO object as it is now (None: there is none)."""
        if obj is None:
            if self._bad is not None or self._spec != _defaults():
                log.info("NodeSLO removed; using the default spec")
            self._spec, self._bad = _defaults(), None
            return
        raw = obj.get("spec")
        try:
            spec, errors = nodeslo.merge_over_defaults(raw)
        except (TypeError, ValueError, AttributeError) as err:  # a spec of the wrong shape
            spec, errors = self._spec, [f"spec: {err}"]
        if errors:
            fingerprint = json.dumps(raw, sort_keys=True, default=str)
            if fingerprint != self._bad:
                self._bad = fingerprint
                self._report_invalid(obj, errors)
            return
        if spec != self._spec:
            log.info("NodeSLO %s applied", obj.get("metadata", {}).get("resourceVersion", ""))
        self._spec, self._bad = spec, None


def invalid_nodeslo_reporter(recorder: events.Recorder | None) -> InvalidReporter:
    """Log a malformed NodeSLO and record a Warning Event on it (when `recorder` is given)."""

    def report(obj: Mapping[str, Any], errors: list[str]) -> None:
        meta = obj.get("metadata") or {}
        message = (
            f"NodeSLO {meta.get('name', '')} ignored, the last valid spec stays in force: "
            + "; ".join(errors)
        )
        log.warning("%s", message)
        if recorder is not None:
            ref = events.ObjectRef(
                kind="NodeSLO",
                name=str(meta.get("name", "")),
                uid=str(meta.get("uid", "")),
                api_version=slo.API_VERSION,
            )
            recorder.event(ref, events.WARNING, INVALID_NODESLO_REASON, message)

    return report


class States:
    """The four informers of this node; see the module docstring."""

    def __init__(
        self,
        client: rest.Rest,
        node_name: str,
        driver: cgroups.Driver,
        readiness: health.Readiness,
        recorder: events.Recorder | None = None,
        *,
        kubelet_root: PurePosixPath = cgroups.DEFAULT_KUBELET_ROOT,
    ) -> None:
        self.node_name = node_name
        by_name = f"metadata.name={node_name}"
        self._slo = NodeSLOState(invalid_nodeslo_reporter(recorder))
        self._pods_version = 0
        self._pods_changed = threading.Condition()
        self._node: cache.Informer[objects.Node] = cache.Informer(
            client, cache.NODES, project=objects.Node.from_api, field_selector=by_name, name="node"
        )
        self._pods: cache.Informer[qstates.PodMeta] = cache.Informer(
            client,
            cache.PODS,
            project=lambda raw: qstates.PodMeta.from_api(raw, driver, kubelet_root),
            field_selector=f"spec.nodeName={node_name}",
            on_event=self._pod_event,
            name="pods",
        )
        self._nodeslo: cache.Informer[Mapping[str, Any]] = cache.Informer(
            client, cache.NODESLOS, field_selector=by_name, on_event=self._slo_event, name="nodeslo"
        )
        self._nodemetric: cache.Informer[Mapping[str, Any]] = cache.Informer(
            client, cache.NODEMETRICS, field_selector=by_name, name="nodemetric"
        )
        self._informers: tuple[tuple[health.Component, cache.Informer[Any]], ...] = tuple(
            (readiness.register(f"states/{inf.name}", "not listed yet"), inf)
            for inf in (self._node, self._pods, self._nodeslo, self._nodemetric)
        )
        self._stop = threading.Event()
        self._health_thread: threading.Thread | None = None

    # -- qosmanager.states.States ------------------------------------------------

    def node(self) -> objects.Node | None:
        """The agent's own Node, or None before the first sync (or if it does not exist)."""
        return self._node.get(self.node_name)

    def pods(self) -> Sequence[qstates.PodMeta]:
        """The pods bound to this node."""
        return self._pods.items()

    @property
    def pods_synced(self) -> bool:
        """Whether `pods()` is the whole list (the Pods informer has listed once)."""
        return self._pods.synced

    def node_slo(self) -> nodeslo.NodeSLOSpec:
        """The NodeSLO spec in force, merged over the defaults (see `NodeSLOState`)."""
        return self._slo.spec

    def wait_synced(self, timeout: float) -> bool:
        """Block up to `timeout` s until the Node and Pods informers listed once.

        The QoS plugins need the node and its pods; the NodeSLO has defaults and
        the NodeMetric is the reporter's business, so neither is waited for.
        """
        deadline = time.monotonic() + timeout
        return self._node.wait_synced(timeout) and self._pods.wait_synced(
            max(0.0, deadline - time.monotonic())
        )

    # -- for the agent ---------------------------------------------------------------

    @property
    def pods_version(self) -> int:
        """Changes whenever a pod is added, changed or removed (`discovery.PodLister`)."""
        return self._pods_version

    def wait_pods_changed(self, since: int, timeout: float) -> int:
        """Block up to `timeout` s until `pods_version` is not `since`; return it
        (`qosmanager.states.PodEvents`)."""
        with self._pods_changed:
            self._pods_changed.wait_for(lambda: self._pods_version != since, timeout)
            return self._pods_version

    def nodemetric(self) -> Mapping[str, Any] | None:
        """The node's NodeMetric as last listed or watched, or None (absent or not synced)."""
        return self._nodemetric.get(self.node_name)

    @property
    def nodemetric_synced(self) -> bool:
        """Whether `nodemetric()` reflects the server (None then means: there is none)."""
        return self._nodemetric.synced

    def start(self) -> None:
        """Start the informers and the thread keeping their /healthz lines current."""
        self._stop.clear()
        for _component, informer in self._informers:
            informer.start()
        self._health_thread = threading.Thread(
            target=self._report_health, name="states-health", daemon=True
        )
        self._health_thread.start()

    def stop(self) -> None:
        """Stop the informers and the health thread."""
        self._stop.set()
        for _component, informer in self._informers:
            informer.stop()
        if self._health_thread is not None:
            self._health_thread.join(5.0)
            if self._health_thread.is_alive():
                log.warning("%s did not stop within 5s", self._health_thread.name)

    # -- internals --------------------------------------------------------------------

    def _pod_event(
        self, _kind: str, _old: qstates.PodMeta | None, _new: qstates.PodMeta | None
    ) -> None:
        with self._pods_changed:
            self._pods_version += 1  # only the pods informer's thread writes it
            self._pods_changed.notify_all()

    def _slo_event(
        self, _kind: str, _old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
    ) -> None:
        self._slo.apply(new)

    def _report_health(self) -> None:
        while True:
            for component, informer in self._informers:
                if informer.synced:
                    component.set(True, f"synced, {len(informer)} object(s)")
                elif informer.last_error:
                    component.set(False, f"not listed yet: {informer.last_error}")
            if self._stop.wait(_HEALTH_PERIOD):
                return
