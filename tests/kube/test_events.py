"""Events: repeats correlated into one object with a count, written off the caller's thread.

Against the real local API server: what `kubectl describe` would list is what the
test reads back. The queue's limits (full, closed, API server away) use a client
of a port nothing listens on.
"""

from __future__ import annotations

import time
from typing import Any

import kubernetes.client
import pytest
from prometheus_client import CollectorRegistry

from kube import events, rest
from testbed import controlplane
from tests.waiting import eventually

pytestmark = pytest.mark.controlplane


def pod_ref(name: str, namespace: str) -> events.ObjectRef:
    return events.ObjectRef(kind="Pod", name=name, namespace=namespace, uid=f"uid-{name}")


def listed(kube: rest.Rest, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = kube.get(f"/api/v1/namespaces/{namespace}/events")["items"]
    return sorted(items, key=lambda e: (e["reason"], e["metadata"]["creationTimestamp"]))


def unreachable() -> rest.Rest:
    config = kubernetes.client.Configuration()
    config.host = f"http://127.0.0.1:{controlplane.free_port()}"
    return rest.Rest(kubernetes.client.ApiClient(config), qps=0, timeout=2)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_fifty_identical_events_in_a_window_are_one_object_counting_50(
    kube: rest.Rest, namespace: str
) -> None:
    """Recorder: the same pod, type and reason 50 times -> one Event, count 50, latest message."""
    recorder = events.Recorder(kube, "nodeqos-test", "n1")
    ref = pod_ref("web-0", namespace)
    for i in range(50):
        assert recorder.event(ref, events.WARNING, "Evicted", f"usage too high ({i})")
    [event] = listed(kube, namespace)
    assert (event["count"], event["reason"], event["message"]) == (
        50,
        "Evicted",
        "usage too high (49)",
    )
    assert event["involvedObject"]["uid"] == "uid-web-0"


def test_different_reasons_types_and_objects_are_separate_events(
    kube: rest.Rest, namespace: str
) -> None:
    """A new reason, type or object starts its own Event."""
    recorder = events.Recorder(kube, "nodeqos-test", "n1")
    a, b = pod_ref("a", namespace), pod_ref("b", namespace)
    for _ in range(3):
        recorder.event(a, events.WARNING, "Evicted", "x")
        recorder.event(a, events.WARNING, "EvictionFailed", "y")
        recorder.event(a, events.NORMAL, "Evicted", "z")
        recorder.event(b, events.WARNING, "Evicted", "x")
    seen = sorted(
        (e["involvedObject"]["name"], e["type"], e["reason"], e["count"])
        for e in listed(kube, namespace)
    )
    assert seen == [
        ("a", "Normal", "Evicted", 3),
        ("a", "Warning", "Evicted", 3),
        ("a", "Warning", "EvictionFailed", 3),
        ("b", "Warning", "Evicted", 3),
    ]


def test_a_repeat_after_the_window_starts_a_new_event(kube: rest.Rest, namespace: str) -> None:
    """Past `window` seconds from the first, the series is a new object."""
    clock = Clock()
    recorder = events.Recorder(kube, "nodeqos-test", window=60, clock=clock)
    ref = pod_ref("p", namespace)
    recorder.event(ref, events.NORMAL, "Throttled", "1")
    clock.now += 59
    recorder.event(ref, events.NORMAL, "Throttled", "2")
    clock.now += 2
    recorder.event(ref, events.NORMAL, "Throttled", "3")
    seen = sorted((e["message"], e["count"]) for e in listed(kube, namespace))
    assert seen == [("2", 2), ("3", 1)]  # the first object counted 1 and 2; 3 started anew


def test_an_event_deleted_meanwhile_is_written_again(kube: rest.Rest, namespace: str) -> None:
    """The series' object gone (TTL, an admin): the repeat creates a new one, not an error."""
    recorder = events.Recorder(kube, "nodeqos-test")
    ref = pod_ref("p", namespace)
    recorder.event(ref, events.NORMAL, "Throttled", "1")
    [first] = listed(kube, namespace)
    kube.delete(f"/api/v1/namespaces/{namespace}/events/{first['metadata']['name']}")
    assert recorder.event(ref, events.NORMAL, "Throttled", "2")
    [second] = listed(kube, namespace)
    assert (second["count"], second["message"]) == (1, "2")


def test_broadcaster_folds_fifty_events_into_one_object_off_the_callers_thread(
    kube: rest.Rest, namespace: str
) -> None:
    """Broadcaster: 50 identical -> one object with count 50; other reasons separate."""
    registry = CollectorRegistry()
    broadcaster = events.Broadcaster(kube, "nodeqos-test", "n1", registry=registry)
    ref = pod_ref("web-0", namespace)
    try:
        started = time.monotonic()
        for i in range(50):
            assert broadcaster.event(ref, events.WARNING, "Evicted", f"m{i}")
        assert broadcaster.event(ref, events.WARNING, "EvictionFailed", "pdb")
        assert time.monotonic() - started < 1.0  # nothing waited for the API server
        assert broadcaster.flush(10)
    finally:
        broadcaster.close()
    seen = [(e["reason"], e["count"], e["message"]) for e in listed(kube, namespace)]
    assert seen == [("Evicted", 50, "m49"), ("EvictionFailed", 1, "pdb")]
    assert not broadcaster.dropped


def test_a_full_queue_drops_and_counts_and_close_is_bounded() -> None:
    """API server away: the queue holds queue_size Events, drops the next (counted), and
    close() ends within its timeout although a retry's backoff is a minute long."""
    registry = CollectorRegistry()
    broadcaster = events.Broadcaster(
        unreachable(), "nodeqos-test", registry=registry, queue_size=2, retries=5, backoff=60
    )
    ns = "default"
    assert broadcaster.event(pod_ref("a", ns), events.NORMAL, "R", "m")
    eventually(lambda: broadcaster.queued == 0, "the writer to take the first Event")
    assert broadcaster.event(pod_ref("b", ns), events.NORMAL, "R", "m")
    assert broadcaster.event(pod_ref("c", ns), events.NORMAL, "R", "m")
    assert broadcaster.event(
        pod_ref("c", ns), events.NORMAL, "R", "again"
    )  # folded: no room needed
    assert not broadcaster.event(pod_ref("d", ns), events.NORMAL, "R", "m")
    started = time.monotonic()
    broadcaster.close(timeout=1.0)
    assert time.monotonic() - started < 3.0
    assert broadcaster.dropped == {"queue_full": 1, "closed": 2, "failed": 1}
    sample = registry.get_sample_value
    assert sample("nodeqos_events_dropped_total", {"reason": "queue_full"}) == 1
    assert sample("nodeqos_events_dropped_total", {"reason": "closed"}) == 2
    assert not broadcaster.event(pod_ref("e", ns), events.NORMAL, "R", "m")
    assert broadcaster.dropped["closed"] == 3


def test_retries_are_bounded() -> None:
    """An API server that never answers: the Event is dropped as failed after the retries."""
    broadcaster = events.Broadcaster(unreachable(), "nodeqos-test", retries=2, backoff=0.01)
    try:
        assert broadcaster.event(pod_ref("a", "default"), events.NORMAL, "R", "m")
        assert broadcaster.flush(20)
    finally:
        broadcaster.close()
    assert broadcaster.dropped == {"failed": 1}
