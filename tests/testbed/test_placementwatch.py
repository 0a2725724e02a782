"""testbed.placementwatch: the summary's "before" is what the descheduler acted on.

The Watch reads the API through `kube.get`; a small fake answers from dicts the
test changes between polls (the e2e run is tests/e2e/test_placement.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from testbed import placementwatch

SCENE = placementwatch.Scene(
    namespace="demo", nodes=("n1", "n2", "n3"), hot="n1", high_cpu=12.0, window_seconds=30
)


class FakeKube:
    """Answers the Watch's GETs: nodes, events, pods and NodeMetrics."""

    def __init__(self) -> None:
        self.cpu: dict[str, str] = {}
        self.stamp = "2026-11-27T12:00:00Z"
        self.events: list[dict[str, Any]] = []

    def get(self, path: str, **_: str) -> dict[str, Any]:
        if path.startswith("/api/v1/nodes/"):
            return {"status": {"allocatable": {"cpu": "2"}}}
        if path.endswith("/events"):
            return {"items": self.events}
        if path.endswith("/pods"):
            return {"items": []}
        return {
            "items": [
                {
                    "metadata": {"name": n},
                    "status": {
                        "updateTime": self.stamp,
                        "nodeMetric": {"nodeUsage": {"resources": {"cpu": cpu}}},
                    },
                }
                for n, cpu in self.cpu.items()
            ]
        }

    def report(self, stamp: str, **cpu: str) -> None:
        self.stamp, self.cpu = stamp, cpu

    def evict(self, pod: str) -> None:
        self.events.append(
            {
                "metadata": {"uid": pod, "creationTimestamp": self.stamp},
                "reason": "Descheduled",
                "involvedObject": {"name": pod},
                "message": "pod evicted from node n1 towards node n2 by LowNodeLoad, profile p",
            }
        )


def test_before_is_the_last_hot_report_before_the_first_eviction_not_start_up_noise() -> None:
    """A start-up spike on n3 in the first report does not reach the summary's "before"."""
    kube = FakeKube()
    watch = placementwatch.Watch(kube, SCENE, initial=set(), say=lambda _: None)  # type: ignore[arg-type]
    kube.report("2026-11-27T12:00:10Z", n1="460m", n2="4m", n3="604m")  # n3 starting up
    watch.poll()
    assert watch.outcome.before == pytest.approx({"n1": 23.0, "n2": 0.2, "n3": 30.2})
    kube.report("2026-11-27T12:00:40Z", n1="458m", n2="4m", n3="6m")  # settled
    watch.poll()
    kube.evict("batch-1")
    kube.report("2026-11-27T12:01:10Z", n1="300m", n2="150m", n3="6m")  # after the eviction
    watch.poll()
    assert watch.outcome.before == pytest.approx({"n1": 22.9, "n2": 0.2, "n3": 0.3})


def test_before_is_taken_even_when_the_first_report_comes_with_the_first_eviction() -> None:
    """The descheduler may act on the first complete report before the watch reads it."""
    kube = FakeKube()
    watch = placementwatch.Watch(kube, SCENE, initial=set(), say=lambda _: None)  # type: ignore[arg-type]
    kube.evict("batch-1")
    kube.report("2026-11-27T12:00:10Z", n1="460m", n2="4m", n3="6m")
    watch.poll()
    assert watch.outcome.before == pytest.approx({"n1": 23.0, "n2": 0.2, "n3": 0.3})
    kube.report("2026-11-27T12:00:40Z", n1="300m", n2="150m", n3="6m")  # cooler: not before
    watch.poll()
    assert watch.outcome.before["n1"] == pytest.approx(23.0)
