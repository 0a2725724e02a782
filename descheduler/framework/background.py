"""Evictions in background (KEP-1397): eviction requests still in progress, across cycles.

kubernetes-sigs/descheduler v0.31+ behind the `EvictionsInBackground` gate
(facts from `pkg/descheduler/evictions/evictions.go` at v0.36.0):

- a pod annotated `descheduler.alpha.kubernetes.io/request-evict-only` may
  answer an eviction with HTTP 429 whose message contains "Eviction triggered
  evacuation" (KubeVirt's webhook does): the pod evacuates itself, in its own
  time. The descheduler then *assumes* an eviction in progress for it;
- a pod carrying both that annotation and
  `descheduler.alpha.kubernetes.io/eviction-in-progress`, and not Succeeded or
  Failed, is an eviction in progress whoever requested it (this is also how a
  restarted descheduler finds them again);
- every request in progress counts against maxNoOfPodsToEvictPerNode,
  ...PerNamespace and ...Total, in every cycle, until the pod is gone, has
  completed, has lost the request-evict-only annotation, or lost the
  in-progress annotation it had (the evacuation was cancelled); an assumed
  request nobody confirms is dropped after 10 minutes;
- asking again for a pod whose request is in progress is a no-op that the
  caller sees as success (the pod is leaving).

Upstream keeps this in an informer event handler; here `sync` reconciles the
table with each cycle's snapshot of pods, which sees the same transitions at
cycle granularity (the "was in progress, is no longer" test uses the flag
`seen_in_progress` instead of the informer's old object).

Imports nothing of ours but `kube`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from kube import eviction, objects

ANNOTATION_REQUEST_EVICT_ONLY = "descheduler.alpha.kubernetes.io/request-evict-only"
ANNOTATION_EVICTION_IN_PROGRESS = "descheduler.alpha.kubernetes.io/eviction-in-progress"
TRIGGERED_TEXT = "Eviction triggered evacuation"
ASSUMED_TIMEOUT = timedelta(minutes=10)  # assumedEvictionRequestTimeoutSeconds
_DONE = frozenset({"Succeeded", "Failed"})


@dataclass(slots=True)
class Request:
    namespace: str
    name: str
    node: str
    assumed: bool  # we asked and got "evacuation triggered"; not yet seen in progress
    since: datetime
    seen_in_progress: bool
    plugin: str = ""
    profile: str = ""


def requests_background(pod: objects.Pod) -> bool:
    """The pod asks to be evicted only through a request it carries out itself."""
    return ANNOTATION_REQUEST_EVICT_ONLY in pod.annotations


def in_progress(pod: objects.Pod) -> bool:
    """The pod says an eviction of its own is under way."""
    return (
        requests_background(pod)
        and ANNOTATION_EVICTION_IN_PROGRESS in pod.annotations
        and pod.phase not in _DONE
    )


def triggered(pod: objects.Pod, result: eviction.Result) -> bool:
    """The Eviction API's answer means "evacuation started" for this pod."""
    return (
        requests_background(pod)
        and result.outcome is eviction.Outcome.PDB_BLOCKED
        and TRIGGERED_TEXT in result.message
    )


def completed(pod: objects.Pod) -> bool:
    return pod.phase in _DONE


class BackgroundRequests:
    """Eviction requests in progress, by pod UID, with counts the limit ledger adds."""

    __slots__ = ("_requests", "timeout")

    def __init__(self, timeout: timedelta = ASSUMED_TIMEOUT) -> None:
        self._requests: dict[str, Request] = {}
        self.timeout = timeout

    def __len__(self) -> int:
        return len(self._requests)

    def __contains__(self, uid: object) -> bool:
        return uid in self._requests

    def get(self, uid: str) -> Request | None:
        return self._requests.get(uid)

    def sync(self, pods: Iterable[objects.Pod], now: datetime) -> list[Request]:
        """Reconcile with the cluster's pods at the start of a cycle.

        Returns the requests we made whose pod is now gone: evictions that
        finished (upstream counts each as a `success` then).
        """
        current: dict[str, objects.Pod] = {pod.uid: pod for pod in pods}
        finished = []
        for uid, request in list(self._requests.items()):
            pod = current.get(uid)
            if pod is None and request.assumed:
                finished.append(request)
            if (
                pod is None
                or not requests_background(pod)
                or completed(pod)
                or (
                    request.seen_in_progress
                    and ANNOTATION_EVICTION_IN_PROGRESS not in pod.annotations
                )
                or (request.assumed and now - request.since > self.timeout)
            ):
                del self._requests[uid]
        for uid, pod in current.items():
            if not in_progress(pod):
                continue
            known = self._requests.get(uid)
            if known is None:
                self._requests[uid] = Request(
                    pod.namespace, pod.name, pod.node_name, False, now, True
                )
            else:
                known.seen_in_progress = True
        return finished

    def assume(self, pod: objects.Pod, now: datetime, *, plugin: str, profile: str) -> None:
        """Our eviction request started the pod's evacuation; the first requester wins."""
        request = self._requests.get(pod.uid)
        if request is not None:
            if not request.assumed:
                request.assumed, request.since = True, now
                request.plugin, request.profile = plugin, profile
            return
        self._requests[pod.uid] = Request(
            pod.namespace, pod.name, pod.node_name, True, now, False, plugin, profile
        )

    def node_count(self, node: str) -> int:
        return sum(1 for r in self._requests.values() if r.node == node)

    def namespace_count(self, namespace: str) -> int:
        return sum(1 for r in self._requests.values() if r.namespace == namespace)
