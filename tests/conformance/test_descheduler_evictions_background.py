"""kubernetes-sigs/descheduler evictions in background (KEP-1397), its tests replayed as data.

Source: kubernetes-sigs/descheduler `pkg/descheduler/evictions/evictions_test.go` at
v0.36.0 (commit 8005cdf78391e2c071cfa653c462dfefc2de8856): TestEvictionRequestsCacheCleanup,
TestEvictionInBackgroundMetrics, TestEvictionInBackgroundMetrics_InformerRace.

Those tests call `PodEvictor.EvictPod` directly over a fake clientset whose
eviction reactor answers p1 and p2 (annotated `request-evict-only`) with 429
"Eviction triggered evacuation". Here each `EvictPod` round is one descheduling
cycle whose plugin asks for the listed pods in order, against a backend
answering the same; "delete" removes pods from the cluster (upstream's
informer DeleteFunc, seen here at the next cycle's start); "expire" moves the
clock past the 10-minute timeout of assumed requests (upstream's test shortens
the timeout to 1 s and sleeps 2 s). The checks are upstream's:
`TotalEvicted()` (evictions that are not in background), `TotalEvictionRequests()`
(requests in progress) and `descheduler_pods_evicted_total` by `result`.
Every step agrees; none differs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from descheduler import features, framework
from descheduler.framework import Handle, Snapshot
from descheduler.framework import background as bg
from kube import objects
from tests import builders
from tests.descheduler import fakes
from tests.descheduler.test_evictor_background import EvacuatingBackend

TITLE = "descheduler evictions in background"
FILE = "kubernetes-sigs/descheduler pkg/descheduler/evictions/evictions_test.go"
COMMIT = "8005cdf78391e2c071cfa653c462dfefc2de8856"  # v0.36.0


@dataclass(frozen=True)
class Step:
    do: str  # "evict" (one cycle asking for `pods` in order), "delete", "confirm", "expire"
    pods: Sequence[str] = ()
    evicted: int | None = None  # TotalEvicted() after the step
    requests: int | None = None  # TotalEvictionRequests() after the step
    metrics: dict[str, int] = field(default_factory=dict)  # result -> count


# p1, p2: request-evict-only, answered "Eviction triggered evacuation"; p3, p4: plain.
CASES = [
    pytest.param(
        ("p1", "p2", "p3", "p4"),
        [
            Step("evict", ("p1", "p2", "p3", "p4"), evicted=2, requests=2),
            Step("expire", requests=0),
        ],
        id="TestEvictionRequestsCacheCleanup",
    ),
    pytest.param(
        ("p1", "p2", "p3", "p4"),
        [
            Step("evict", ("p1", "p2", "p3", "p4"), metrics={"background": 2, "success": 2}),
            Step("evict", ("p1", "p2"), metrics={"background": 2, "success": 2}),
            Step("delete", ("p1", "p2"), requests=0, metrics={"background": 2, "success": 4}),
        ],
        id="TestEvictionInBackgroundMetrics",
    ),
    pytest.param(
        ("p1",),
        [
            Step("evict", ("p1",), metrics={"background": 1}),
            # KubeVirt's in-progress annotation seen after our request (the informer race)
            Step("confirm", ("p1",), requests=1),
            Step("delete", ("p1",), requests=0, metrics={"background": 1, "success": 1}),
        ],
        id="TestEvictionInBackgroundMetrics_InformerRace",
    ),
]


def make(name: str, confirmed: bool = False) -> objects.Pod:
    annotations = {}
    if name in ("p1", "p2"):
        annotations[bg.ANNOTATION_REQUEST_EVICT_ONLY] = ""
        if confirmed:
            annotations[bg.ANNOTATION_EVICTION_IN_PROGRESS] = ""
    return builders.make_pod(name, namespace="dev", node="n1", annotations=annotations)


@pytest.mark.parametrize(("pods", "steps"), CASES)
def test_replay(pods: Sequence[str], steps: Sequence[Step]) -> None:
    """Each step's counts are upstream's."""
    wanted: list[str] = []

    def ask(name: str, snapshot: Snapshot, handle: Handle) -> None:
        by_name = {p.name: p for p in snapshot.pods()}
        for pod_name in wanted:
            if pod_name in by_name:
                handle.evictor.evict(by_name[pod_name], plugin=name, reason="replay")

    live = {name: make(name) for name in pods}
    source = framework.StaticSource(nodes=fakes.nodes("n1", "n2"), pods=live.values())
    raw = fakes.policy(balance=["TestStrategy"], maxNoOfPodsToEvictTotal=100)
    raw["profiles"][0]["name"] = "TestProfile"
    h = fakes.harness(
        raw,
        fakes.registry_with(TestStrategy=ask),
        source,
        backend=EvacuatingBackend("p1", "p2"),
        gates=features.Gates.parse("EvictionsInBackground=true"),
    )
    evicted = 0
    for step in steps:
        wanted[:] = []
        if step.do == "evict":
            wanted[:] = step.pods
        elif step.do == "delete":
            for name in step.pods:
                del live[name]
        elif step.do == "confirm":
            live.update({name: make(name, confirmed=True) for name in step.pods})
        elif step.do == "expire":
            h.clock.advance(minutes=10, seconds=1)
        source.replace(pods=live.values())
        report = h.runner.run_once()
        evicted += sum(1 for e in report.evictions if not e.background)
        requests = h.runner._core.background
        assert requests is not None
        if step.evicted is not None:
            assert evicted == step.evicted, step
        if step.requests is not None:
            assert len(requests) == step.requests, step
        for result, count in step.metrics.items():
            assert total(h, result) == count, (step, result)


def total(h: fakes.Harness, result: str) -> int:
    samples: Any = h.registry.collect()
    return int(
        sum(
            s.value
            for metric in samples
            for s in metric.samples
            if s.name == "nodeqos_descheduler_pods_evicted_total" and s.labels["result"] == result
        )
    )
