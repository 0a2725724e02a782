"""Eviction backends: how an admitted eviction reaches the API server.

The framework's evictor decides *whether* a pod goes (filters, limits,
dry-run); a backend only carries the decision out and says what the server
answered, as a `kube.eviction.Result`:

- `EvictionAPI` (the default, docs/design.md "Beyond the reference" 5) POSTs a
  `policy/v1` Eviction with a UID precondition, so the API server enforces
  PodDisruptionBudgets (429 → `PDB_BLOCKED`) and a namesake created since the
  decision is never evicted;
- `Delete` deletes the pod directly (bypasses PodDisruptionBudgets; opt-in).

Both record an Event on the pod saying which plugin evicted it and why (the
Eviction API does not persist the Eviction object, so its metadata would only
reach audit logs; the Event is what `kubectl describe pod` shows). Neither is
ever called in dry-run mode: dry-run writes nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import ClassVar, Protocol

from kube import events, eviction, objects, rest

log = logging.getLogger(__name__)

COMPONENT = "nodeqos-descheduler"
EVENT_REASON = "Descheduled"  # what kubernetes-sigs/descheduler records
FAILURE_EVENT_REASON = "EvictionFailed"


@dataclass(frozen=True, slots=True)
class EvictOptions:
    """Who asked for an eviction and why: carried into Events and logs."""

    plugin: str
    reason: str
    profile: str = ""
    destination: str = ""  # the node the plugin expects the replacement on, if it chose one


class Backend(Protocol):
    """Carries out one eviction and classifies the server's answer."""

    name: str

    def evict(self, pod: objects.Pod, options: EvictOptions) -> eviction.Result: ...


def event_message(pod: objects.Pod, options: EvictOptions) -> str:
    """The Event text: node, plugin, profile and the plugin's reason."""
    profile = f", profile {options.profile}" if options.profile else ""
    why = f": {options.reason}" if options.reason else ""
    towards = f" towards node {options.destination}" if options.destination else ""
    return f"pod evicted from node {pod.node_name}{towards} by {options.plugin}{profile}{why}"


def request_annotations(options: EvictOptions) -> dict[str, str]:
    """The Eviction's annotations, with kubernetes-sigs/descheduler v0.35's keys."""
    return {
        "reason": f"triggered by {options.profile}/{options.plugin}: {options.reason}",
        "requested-by": COMPONENT,
    }


def _pod_ref(pod: objects.Pod) -> events.ObjectRef:
    return events.ObjectRef(kind="Pod", name=pod.name, namespace=pod.namespace, uid=pod.uid)


class _Send(Protocol):
    """`kube.eviction.evict` or `kube.eviction.delete`: the call that differs between backends."""

    def __call__(
        self,
        client: rest.Rest,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        grace_period_seconds: int | None = None,
        annotations: dict[str, str] | None = None,
    ) -> eviction.Result: ...


class _Backend:
    """One eviction call plus the Events about it (best effort: kube.events never raises).

    A subclass names itself and sets `_send`; everything else is shared.
    """

    name: str
    _send: ClassVar[_Send]

    def __init__(
        self,
        client: rest.Rest,
        recorder: events.Recorder | None = None,
        *,
        grace_period_seconds: int | None = None,
        failure_events: bool = False,
    ) -> None:
        self._client = client
        self._recorder = recorder
        self._grace = grace_period_seconds
        self._failure_events = failure_events

    def evict(self, pod: objects.Pod, options: EvictOptions) -> eviction.Result:
        result = self._send(
            self._client,
            pod.namespace,
            pod.name,
            uid=pod.uid or None,
            grace_period_seconds=self._grace,
            annotations=request_annotations(options),
        )
        self._record(pod, options, result)
        return result

    def _record(self, pod: objects.Pod, options: EvictOptions, result: eviction.Result) -> None:
        if self._recorder is None:
            return
        if result.ok:
            self._recorder.event(
                _pod_ref(pod), events.NORMAL, EVENT_REASON, event_message(pod, options)
            )
        elif self._failure_events and result.outcome is not eviction.Outcome.NOT_FOUND:
            # upstream's evictionFailureEventNotification; a vanished pod has no one to tell
            self._recorder.event(
                _pod_ref(pod),
                events.WARNING,
                FAILURE_EVENT_REASON,
                f"eviction by {options.plugin} failed ({result.outcome.value}): {result.message}",
            )


class EvictionAPI(_Backend):
    """`policy/v1` Eviction with a UID precondition; PodDisruptionBudgets apply."""

    name = "EvictionAPI"
    _send = staticmethod(eviction.evict)


class Delete(_Backend):
    """DELETE with a UID precondition: ignores PodDisruptionBudgets (opt-in only)."""

    name = "Delete"
    _send = staticmethod(eviction.delete)
